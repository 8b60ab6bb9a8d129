/* The compiled twin of record/_correlation.py's MAC: HMAC-SHA256 (RFC 2104, FIPS 180-4) of
 * "kind:nonce" under the correlation secret, its first 32 hex digits. The Python (hmac over
 * OpenSSL) stays the reference: tests/record/test_mac_c.py holds this to it.
 *
 * Why a twin: the caller tap mints an id for every exchange. Through OpenSSL the MAC was a keyed
 * HMAC context copied (three digest contexts allocated and copied), fed and finished, about 16k
 * instructions; here the two keyed SHA-256 states are plain structs, copied on the stack, and the
 * message and the inner digest are one block each.
 *
 * One type, Keyed(secret): the states after the key's inner and outer pads. Keyed.mac(kind, nonce)
 * gives the MAC's digits as a str; a kind or nonce that is not ASCII raises UnicodeEncodeError, as
 * the reference's encode("ascii") does. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* SHA-256 */

typedef struct {
    uint32_t h[8];
    uint64_t length; /* bytes absorbed */
    unsigned char block[64];
    size_t used; /* bytes of `block` filled */
} Sha256;

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* one 64-byte block into the state */
static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

static void sha256_init(Sha256 *s) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->length = 0;
    s->used = 0;
}

static void sha256_update(Sha256 *s, const unsigned char *p, size_t n) {
    s->length += n;
    if (s->used) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        n -= take;
        if (s->used < 64)
            return;
        sha256_block(s->h, s->block);
        s->used = 0;
    }
    for (; n >= 64; p += 64, n -= 64)
        sha256_block(s->h, p);
    memcpy(s->block, p, n);
    s->used = n;
}

static void sha256_final(Sha256 *s, unsigned char out[32]) {
    uint64_t bits = s->length * 8;
    s->block[s->used++] = 0x80;
    if (s->used > 56) {
        memset(s->block + s->used, 0, 64 - s->used);
        sha256_block(s->h, s->block);
        s->used = 0;
    }
    memset(s->block + s->used, 0, 56 - s->used);
    for (int i = 0; i < 8; i++)
        s->block[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_block(s->h, s->block);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* Keyed */

/* the MAC's hex digits given out: record/_correlation.py's _MAC_HEX */
#define MAC_HEX 32
/* the longest "kind:nonce" taken (a nonce is 24 digits; a longer one is refused, never cut) */
#define MESSAGE_MAX 256

typedef struct {
    PyObject_HEAD
    Sha256 inner; /* after the key xor the inner pad (one block) */
    Sha256 outer; /* after the key xor the outer pad */
} KeyedObject;

static PyObject *keyed_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Py_buffer secret;
    static char *kwlist[] = {"secret", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*:Keyed", kwlist, &secret))
        return NULL;
    unsigned char key[64] = {0};
    if (secret.len > 64) { /* a key longer than the block is its digest (RFC 2104) */
        Sha256 s;
        sha256_init(&s);
        sha256_update(&s, secret.buf, (size_t)secret.len);
        sha256_final(&s, key);
    } else {
        memcpy(key, secret.buf, (size_t)secret.len);
    }
    PyBuffer_Release(&secret);
    KeyedObject *self = (KeyedObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    unsigned char pad[64];
    for (int i = 0; i < 64; i++)
        pad[i] = key[i] ^ 0x36;
    sha256_init(&self->inner);
    sha256_update(&self->inner, pad, 64);
    for (int i = 0; i < 64; i++)
        pad[i] = key[i] ^ 0x5c;
    sha256_init(&self->outer);
    sha256_update(&self->outer, pad, 64);
    return (PyObject *)self;
}

/* the ASCII bytes of `text` (a str), or NULL with UnicodeEncodeError raised as str.encode("ascii")
 * raises it */
static const char *ascii_of(PyObject *text, Py_ssize_t *n) {
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "Keyed.mac: str expected, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text)) {
        PyObject *b = PyUnicode_AsASCIIString(text); /* raises the reference's error */
        Py_XDECREF(b);
        if (b != NULL)
            PyErr_SetString(PyExc_ValueError, "Keyed.mac: not ASCII");
        return NULL;
    }
    *n = PyUnicode_GET_LENGTH(text);
    return (const char *)PyUnicode_DATA(text);
}

/* mac(kind, nonce): the first 32 hex digits of HMAC-SHA256("kind:nonce") */
static PyObject *keyed_mac(KeyedObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "Keyed.mac(kind, nonce) takes two arguments");
        return NULL;
    }
    Py_ssize_t nk, nn;
    const char *kind = ascii_of(args[0], &nk);
    if (kind == NULL)
        return NULL;
    const char *nonce = ascii_of(args[1], &nn);
    if (nonce == NULL)
        return NULL;
    if (nk + 1 + nn > MESSAGE_MAX) {
        PyErr_Format(PyExc_ValueError, "Keyed.mac: kind and nonce over %d characters", MESSAGE_MAX);
        return NULL;
    }
    unsigned char message[MESSAGE_MAX];
    memcpy(message, kind, (size_t)nk);
    message[nk] = ':';
    memcpy(message + nk + 1, nonce, (size_t)nn);
    unsigned char digest[32];
    Sha256 s = self->inner;
    sha256_update(&s, message, (size_t)(nk + 1 + nn));
    sha256_final(&s, digest);
    s = self->outer;
    sha256_update(&s, digest, 32);
    sha256_final(&s, digest);
    PyObject *out = PyUnicode_New(MAC_HEX, 127);
    if (out == NULL)
        return NULL;
    char *hex = (char *)PyUnicode_DATA(out);
    for (int i = 0; i < MAC_HEX / 2; i++) {
        hex[2 * i] = "0123456789abcdef"[digest[i] >> 4];
        hex[2 * i + 1] = "0123456789abcdef"[digest[i] & 15];
    }
    return out;
}

static PyMethodDef keyed_methods[] = {
    {"mac", (PyCFunction)(void (*)(void))keyed_mac, METH_FASTCALL,
     "mac(kind, nonce): the first 32 hex digits of HMAC-SHA256 of 'kind:nonce' under the secret"},
    {NULL},
};

static PyTypeObject KeyedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "wirecheck.record._mac_c.Keyed",
    .tp_basicsize = sizeof(KeyedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "HMAC-SHA256 keyed with one secret: Keyed(secret).mac(kind, nonce).",
    .tp_new = keyed_new,
    .tp_methods = keyed_methods,
};

static struct PyModuleDef mac_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "wirecheck.record._mac_c",
    .m_doc = "The compiled twin of the correlation id's MAC (record/_correlation.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__mac_c(void) {
    if (PyType_Ready(&KeyedType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&mac_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Keyed", (PyObject *)&KeyedType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
