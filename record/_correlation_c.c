/* The compiled twin of record/_correlation.py's MAC: HMAC-SHA256 (RFC 2104, FIPS 180-4) of a short
 * message under a key whose two padded blocks were hashed once.
 *
 * The caller tap makes one MAC an exchange. Through hmac's objects (a copy of a keyed OpenSSL HMAC,
 * its update and its hex digest) that was about 20k instructions, most of it OpenSSL 3's
 * context copies and provider dispatch around two SHA-256 compressions, which take about 3k here.
 * ``keyed(key)`` gives the state after each pad's block (64 bytes: the inner's eight words, then
 * the outer's); ``mac_hex(keyed, message)`` finishes both hashes from it. The Python reference
 * (hmac) stays the definition: tests/record/test_correlation.py holds the two equal, for keys and
 * messages of every length (a key past a block is hashed first, as HMAC says). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

static const uint32_t H0[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

/* one 64-byte block into the state */
static void compress(uint32_t state[8], const unsigned char block[64]) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
               (uint32_t)block[4 * i + 2] << 8 | (uint32_t)block[4 * i + 3];
    /* unrolled, the eight words' rotation each round is the compiler's renaming, not moves: about
     * a third fewer instructions a block */
#pragma GCC unroll 64
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
#pragma GCC unroll 64
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

/* the rest of a hash whose state has taken ``done`` bytes (a multiple of 64) already: ``data``,
 * then the padding and the length in bits; the digest into ``out`` */
static void finish(uint32_t state[8], uint64_t done, const unsigned char *data, size_t len,
                   unsigned char out[32]) {
    uint64_t bits = (done + (uint64_t)len) * 8;
    while (len >= 64) {
        compress(state, data);
        data += 64;
        len -= 64;
    }
    unsigned char block[128] = {0};
    memcpy(block, data, len);
    block[len] = 0x80;
    size_t blocks = len + 1 + 8 <= 64 ? 1 : 2;
    for (int i = 0; i < 8; i++)
        block[blocks * 64 - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (size_t i = 0; i < blocks; i++)
        compress(state, block + 64 * i);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(state[i] >> 24);
        out[4 * i + 1] = (unsigned char)(state[i] >> 16);
        out[4 * i + 2] = (unsigned char)(state[i] >> 8);
        out[4 * i + 3] = (unsigned char)state[i];
    }
}

/* keyed(key: bytes) -> bytes: the inner and the outer state after their pad's block, 8 words each
 * in this machine's order (opaque: only mac_hex reads them) */
static PyObject *keyed(PyObject *self, PyObject *arg) {
    Py_buffer key;
    if (PyObject_GetBuffer(arg, &key, PyBUF_SIMPLE) < 0)
        return NULL;
    unsigned char block[64] = {0};
    if (key.len > 64) { /* a key longer than a block is hashed first (RFC 2104) */
        uint32_t st[8];
        memcpy(st, H0, sizeof st);
        finish(st, 0, key.buf, (size_t)key.len, block);
    } else {
        memcpy(block, key.buf, (size_t)key.len);
    }
    PyBuffer_Release(&key);
    uint32_t states[16];
    unsigned char pad[64];
    memcpy(states, H0, sizeof H0);
    for (int i = 0; i < 64; i++)
        pad[i] = block[i] ^ 0x36;
    compress(states, pad);
    memcpy(states + 8, H0, sizeof H0);
    for (int i = 0; i < 64; i++)
        pad[i] = block[i] ^ 0x5c;
    compress(states + 8, pad);
    return PyBytes_FromStringAndSize((const char *)states, sizeof states);
}

/* mac_hex(keyed: bytes, message: bytes) -> str: HMAC-SHA256's hex digest (64 lower-case digits) */
static PyObject *mac_hex(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "mac_hex(keyed, message) takes two arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != 64) {
        PyErr_SetString(PyExc_ValueError, "mac_hex: keyed must be the 64 bytes keyed() gives");
        return NULL;
    }
    Py_buffer msg;
    if (PyObject_GetBuffer(args[1], &msg, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t inner[8], outer[8];
    memcpy(inner, PyBytes_AS_STRING(args[0]), sizeof inner);
    memcpy(outer, PyBytes_AS_STRING(args[0]) + sizeof inner, sizeof outer);
    unsigned char digest[32];
    finish(inner, 64, msg.buf, (size_t)msg.len, digest);
    PyBuffer_Release(&msg);
    finish(outer, 64, digest, sizeof digest, digest);
    static const char hex[] = "0123456789abcdef";
    char text[64];
    for (int i = 0; i < 32; i++) {
        text[2 * i] = hex[digest[i] >> 4];
        text[2 * i + 1] = hex[digest[i] & 15];
    }
    return PyUnicode_FromStringAndSize(text, sizeof text);
}

static PyMethodDef methods[] = {
    {"keyed", keyed, METH_O, "HMAC-SHA256's two states after the key's pads, for mac_hex."},
    {"mac_hex", (PyCFunction)(void (*)(void))mac_hex, METH_FASTCALL,
     "HMAC-SHA256 of message under the key keyed() was given, as 64 hex digits."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_correlation_c", "The compiled twin of record/_correlation.py's MAC.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__correlation_c(void) { return PyModule_Create(&module); }
