/* The compiled twin of record/_rows.py's chunk columns: a streamed response's chunks as the row
 * keeps them (each one's arrival offset in whole microseconds, each one's size, their bytes joined),
 * in one pass over the list with no Python object made but the results.
 *
 * On the store writer's thread, which shares the forwarding loop's GIL, the Python way made a float
 * and an integer per chunk in a comprehension, packed and unpacked them through struct, and joined
 * the bytes: about a third of the row's document. The rounding is the one _whole_us reads out of
 * the bytes of float sums (its docstring says why it is the decimal way's wherever it answers); an
 * offset within 2**-16 of a half microsecond takes _each_us's own step (each_us). A chunk off that
 * path (an offset past 71 minutes, before the start, NaN, an infinity) or of another shape (an
 * offset that is not a float, data that is not bytes) makes the whole call answer None, and the
 * Python reference does the response. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* 1.5 * 2**36 + 0.5: sums in [2**36, 2**37) lie 65536ths apart; the half rounds to nearest */
static const double GRID = 1.5 * 68719476736.0 + 0.5;

/* the attribute names, interned once at import; and where an exact wirecheck.contracts.Chunk (a
 * slotted dataclass) holds its two fields, read at import from its member descriptors, so that each
 * chunk's fields are two loads, not two generic attribute lookups (each a type lookup and a
 * descriptor call: about half of this function's work). Set once, constants after. */
static PyObject *name_t_ms, *name_data;
static PyTypeObject *chunk_type;
static Py_ssize_t t_ms_offset = -1, data_offset = -1;

/* the field ``name`` of an exact Chunk, a new reference (NULL with AttributeError where unset, as
 * the attribute's read says), or the attribute read the generic way for anything else */
static PyObject *field(PyObject *chunk, PyObject *name, Py_ssize_t offset) {
    if (offset >= 0 && Py_IS_TYPE(chunk, chunk_type)) {
        PyObject *value = *(PyObject **)((char *)chunk + offset);
        if (value != NULL)
            return Py_NewRef(value);
    }
    return PyObject_GetAttr(chunk, name);
}

/* the offset of a slot of ``type`` named ``name``, or -1 where it is not a plain object slot */
static Py_ssize_t slot_offset(PyObject *type, const char *name) {
    PyObject *descr = PyObject_GetAttrString(type, name);
    Py_ssize_t offset = -1;
    if (descr == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == Py_T_OBJECT_EX && !(member->flags & Py_READONLY))
            offset = member->offset;
    }
    Py_DECREF(descr);
    return offset;
}

/* Whole microseconds of one offset by the sum's bits; -1 where the Python reference must decide
 * (us + 0.5 outside [0, 2**32): past 71 minutes, before the start, NaN, infinite), -2 where the
 * sum is within 2**-16 of a whole number (``us_of`` takes _each_us's step then). The two are one
 * function of t_ms wherever this answers: tests/record/test_rows_c.py. */
static long long whole_us(double t_ms) {
    double sum = t_ms * 1000.0 + GRID; /* two roundings, as Python's two operations make them */
    uint64_t bits;
    memcpy(&bits, &sum, sizeof bits);
    if ((bits >> 48) != 0x4238) /* not in [1.5 * 2**36, 1.5625 * 2**36): NaN, infinite, ... */
        return -1;
    unsigned frac = (unsigned)(bits & 0xffff);
    if (frac == 0 || frac == 0xffff) /* within 2**-16 of a whole number: _each_us's step decides */
        return -2;
    return (long long)((bits >> 16) & 0xffffffffu);
}

/* _each_us's step for one offset (record/_rows.py), where whole_us says -2: floor(us + 0.5), and
 * within rounding error of a half the decimal way, round(round(t_ms, 3) * 1000), by the float's
 * own methods (``t`` is an exact float: no code of anyone's runs). The offsets are stamped to the
 * nanosecond, so about one in a thousand lies on a half microsecond: with a row left whole to the
 * reference for it, one stream of 20 chunks in fifty was written by Python at ten times the cost.
 * 0 with ``*us`` set (-1 for an offset of exactly -0.5 us, as the decimal way rounds it), or -1
 * with an exception set. */
static int each_us(PyObject *t, long long *us_out) {
    double us = PyFloat_AS_DOUBLE(t) * 1000.0;
    double whole = floor(us + 0.5);
    if (fabs(fabs(us - whole) - 0.5) > 1e-9 + fabs(us) * 1e-12) {
        *us_out = (long long)whole;
        return 0;
    }
    PyObject *three = PyObject_CallMethod(t, "__round__", "i", 3);
    if (three == NULL)
        return -1;
    PyObject *thousand = PyLong_FromLong(1000);
    PyObject *product = thousand == NULL ? NULL : PyNumber_Multiply(three, thousand);
    Py_DECREF(three);
    Py_XDECREF(thousand);
    if (product == NULL)
        return -1;
    PyObject *rounded = PyObject_CallMethod(product, "__round__", NULL);
    Py_DECREF(product);
    if (rounded == NULL)
        return -1;
    long long v = PyLong_AsLongLong(rounded);
    Py_DECREF(rounded);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *us_out = v;
    return 0;
}

/* One offset's whole microseconds: whole_us, with each_us where it says -2. 1 with ``*us`` set; 0
 * where the reference decides; -1 with an exception set. */
static int us_of(PyObject *t, long long *us) {
    if (!PyFloat_CheckExact(t))
        return 0;
    *us = whole_us(PyFloat_AS_DOUBLE(t));
    if (*us == -1)
        return 0;
    if (*us != -2)
        return 1;
    return each_us(t, us) < 0 ? -1 : 1;
}

static PyObject *chunk_columns(PyObject *self, PyObject *chunks) {
    if (!PyList_CheckExact(chunks))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(chunks);
    PyObject *t_us = PyList_New(n), *sizes = PyList_New(n), *datas = PyTuple_New(n);
    PyObject *body = NULL, *result = NULL;
    if (t_us == NULL || sizes == NULL || datas == NULL)
        goto done;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* reading an attribute may run Python code that changes the list: its size each time */
        if (i >= PyList_GET_SIZE(chunks))
            goto fallback;
        PyObject *chunk = PyList_GET_ITEM(chunks, i);
        Py_INCREF(chunk);
        PyObject *t = field(chunk, name_t_ms, t_ms_offset);
        PyObject *data = t == NULL ? NULL : field(chunk, name_data, data_offset);
        Py_DECREF(chunk);
        if (data == NULL) {
            Py_XDECREF(t);
            goto done; /* the error the Python way raises too (a chunk without its fields) */
        }
        PyTuple_SET_ITEM(datas, i, data); /* the tuple owns it now */
        long long us = 0;
        int took = us_of(t, &us);
        Py_DECREF(t);
        if (took < 0)
            goto done;
        if (took == 0 || !PyBytes_CheckExact(data))
            goto fallback;
        Py_ssize_t size = PyBytes_GET_SIZE(data);
        if (size > PY_SSIZE_T_MAX - total) {
            PyErr_SetString(PyExc_OverflowError, "joined chunks too long");
            goto done;
        }
        total += size;
        PyObject *us_obj = PyLong_FromLongLong(us);
        if (us_obj == NULL)
            goto done;
        PyList_SET_ITEM(t_us, i, us_obj);
        PyObject *size_obj = PyLong_FromSsize_t(size);
        if (size_obj == NULL)
            goto done;
        PyList_SET_ITEM(sizes, i, size_obj);
    }
    if (PyList_GET_SIZE(chunks) != n)
        goto fallback;
    body = PyBytes_FromStringAndSize(NULL, total);
    if (body == NULL)
        goto done;
    char *at = PyBytes_AS_STRING(body);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *data = PyTuple_GET_ITEM(datas, i);
        Py_ssize_t size = PyBytes_GET_SIZE(data);
        memcpy(at, PyBytes_AS_STRING(data), (size_t)size);
        at += size;
    }
    result = PyTuple_Pack(3, t_us, sizes, body);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    /* a list's unset items are NULL, which its deallocation skips */
    Py_XDECREF(t_us);
    Py_XDECREF(sizes);
    Py_XDECREF(datas);
    Py_XDECREF(body);
    return result;
}

/* ---- reading a row back: The compiled twin of record/_rows.py's ``_joined`` (reading a streamed response's stored chunks).

A row's stored chunks are two JSON lists: each chunk's arrival in whole microseconds and its size.
Reading them back checks that the sizes are whole numbers of at least 0 adding up to the body's
bytes, copies the sizes and divides each arrival by 1000. In Python that is five passes over the
lists (min, sum, the sizes' types, a copy, a division each) and was a third of reading a row. Here
it is one pass over each list.

Only the plain case is taken: two lists of equal length, every size an int (exactly, not a bool)
that fits in a long long and is at least 0, every arrival an int or a float (exactly). Anything
else returns None, and the caller runs the Python reference, which says what is wrong (or reads
what is odd but right, such as a bool). So this never decides a row is wrong: it only reads the
rows it is sure of, exactly as the reference does. The GIL is held throughout. */

/* joined(times, sizes, data) -> (data, sizes copied, times / 1000.0) or None */
static PyObject *
rows_joined(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "joined() takes three arguments: times, sizes, data");
        return NULL;
    }
    PyObject *times = args[0], *sizes = args[1], *data = args[2];
    if (!PyList_CheckExact(times) || !PyList_CheckExact(sizes) || !PyBytes_CheckExact(data)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(sizes);
    if (PyList_GET_SIZE(times) != n) {
        Py_RETURN_NONE;
    }
    /* the sizes first: nothing is made for a row whose sizes do not cut its bytes */
    Py_ssize_t total = PyBytes_GET_SIZE(data);
    long long sum = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *size = PyList_GET_ITEM(sizes, i);
        if (!PyLong_CheckExact(size)) {
            Py_RETURN_NONE;
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(size, &overflow);
        if (overflow != 0) {
            Py_RETURN_NONE;
        }
        if (v == -1 && PyErr_Occurred()) {
            return NULL;
        }
        /* each size at most the bytes and the sum never past them: it cannot overflow */
        if (v < 0 || v > (long long)total - sum) {
            Py_RETURN_NONE;
        }
        sum += v;
    }
    if (sum != (long long)total) {
        Py_RETURN_NONE;
    }
    /* the arrivals: as ``t / 1000.0`` reads them (an int is made a float first, rounded once) */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(times, i);
        if (!PyLong_CheckExact(t) && !PyFloat_CheckExact(t)) {
            Py_RETURN_NONE;
        }
    }
    PyObject *t_ms = PyList_New(n);
    if (t_ms == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* the list's length asked again: making t_ms may have run a collection, and a finalizer
           could have changed the lists (never the case for a parsed document: then the reference) */
        if (PyList_GET_SIZE(times) != n || PyList_GET_SIZE(sizes) != n) {
            Py_DECREF(t_ms);
            Py_RETURN_NONE;
        }
        PyObject *t = PyList_GET_ITEM(times, i);
        if (!PyLong_CheckExact(t) && !PyFloat_CheckExact(t)) {
            Py_DECREF(t_ms);
            Py_RETURN_NONE;
        }
        double d;
        if (PyFloat_CheckExact(t)) {
            d = PyFloat_AS_DOUBLE(t);
        } else {
            d = PyLong_AsDouble(t);
            if (d == -1.0 && PyErr_Occurred()) {
                /* too large for a float: the reference raises it as its division does */
                Py_DECREF(t_ms);
                PyErr_Clear();
                Py_RETURN_NONE;
            }
        }
        PyObject *f = PyFloat_FromDouble(d / 1000.0);
        if (f == NULL) {
            Py_DECREF(t_ms);
            return NULL;
        }
        PyList_SET_ITEM(t_ms, i, f);
    }
    if (PyList_GET_SIZE(sizes) != n) {
        Py_DECREF(t_ms);
        Py_RETURN_NONE;
    }
    PyObject *copy = PyList_GetSlice(sizes, 0, n);
    if (copy == NULL) {
        Py_DECREF(t_ms);
        return NULL;
    }
    PyObject *out = PyTuple_New(3);
    if (out == NULL) {
        Py_DECREF(t_ms);
        Py_DECREF(copy);
        return NULL;
    }
    Py_INCREF(data);
    PyTuple_SET_ITEM(out, 0, data);
    PyTuple_SET_ITEM(out, 1, copy);
    PyTuple_SET_ITEM(out, 2, t_ms);
    return out;
}

/* ---- writing a row: the compiled twin of record/_rows.py's ``row_text_py``.

A row's document is the exchange's interchange form (dump_exchange, redacted by the default
policy, the chunks' columns in the place of its chunks) as compact JSON text, which the Python
builds as dicts and lists and hands to orjson: on the store writer's thread, which shares the
forwarding loop's GIL, about half of the writer's work for an exchange. Here the text is written
in one pass for the shape the proxy records: an exchange of exactly the contracts' classes, strings
that are strings, no error, headers whose names are ASCII and whose verdicts the policy already
keeps, a request body that is UTF-8, and keys of its own (``extra``) of plain values. Anything else
(an error, a body that is not UTF-8, a header name not seen before, a key of its own that is one of
the document's, a container or a number past 64 bits among them, a chunk off the columns' path)
answers None, and the Python reference writes that row. The text is what orjson writes: its
escapes ('"', '\\', the control characters, nothing else), its numbers (a float through orjson
itself). ``tests/record/test_row_text.py`` holds the two byte for byte. */

static PyTypeObject *exchange_type, *request_type, *response_type, *joined_type;
/* JoinedResponse's slot of its joined form (-1: the class is left to the reference) */
static Py_ssize_t joined_off = -1;
/* slot offsets: Exchange's id, tap, request, response, correlation, started_at, error, extra;
   HttpRequest's method, path, headers, body; HttpResponse's status, headers, body, chunks */
enum { X_ID, X_TAP, X_REQUEST, X_RESPONSE, X_CORRELATION, X_STARTED, X_ERROR, X_EXTRA, X_N };
enum { Q_METHOD, Q_PATH, Q_HEADERS, Q_BODY, Q_N };
enum { R_STATUS, R_HEADERS, R_BODY, R_CHUNKS, R_N };
static Py_ssize_t x_off[X_N], q_off[Q_N], r_off[R_N];
static const char *x_names[X_N] = {"id", "tap", "request", "response", "correlation", "started_at", "error", "extra"};
static const char *q_names[Q_N] = {"method", "path", "headers", "body"};
static const char *r_names[R_N] = {"status", "headers", "body", "chunks"};
/* the keys of the document itself (an ``extra`` key among them is updated in place: the reference) */
static PyObject *known_keys, *ended_key, *scheme_mark;

/* where a slotted class keeps each of its fields; 0 where one is not a plain slot (then the class
   is not taken at all) */
static int slots_of(PyObject *type, const char **names, Py_ssize_t *offsets, int n) {
    for (int i = 0; i < n; i++) {
        offsets[i] = slot_offset(type, names[i]);
        if (offsets[i] < 0)
            return 0;
    }
    return 1;
}

/* the field at ``offset`` of an object whose exact class was checked: a new reference, NULL where
   it is unset (then the reference decides) */
static PyObject *slot(PyObject *obj, Py_ssize_t offset) {
    PyObject *value = *(PyObject **)((char *)obj + offset);
    return value == NULL ? NULL : Py_NewRef(value);
}

typedef struct {
    char *p;
    Py_ssize_t n, cap;
    int ascii; /* nothing but ASCII written so far */
    char small[2048];
} Buf;

/* room for ``need`` more bytes: 0, or -1 with MemoryError */
static int grow(Buf *b, Py_ssize_t need) {
    if (need <= b->cap - b->n)
        return 0;
    if (need > PY_SSIZE_T_MAX / 4 - b->n) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t cap = b->cap * 2;
    while (cap < b->n + need)
        cap *= 2;
    char *p = b->p == b->small ? PyMem_Malloc((size_t)cap) : PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->p == b->small)
        memcpy(p, b->small, (size_t)b->n);
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int put(Buf *b, const char *s, Py_ssize_t n) {
    if (n > b->cap - b->n && grow(b, n) < 0)
        return -1;
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

#define PUT(b, lit) put((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

static const char HEX[] = "0123456789abcdef";

/* what escaping a byte adds to it: 1 for '"', '\\' and the control characters with a name, 5 for
   the other control characters (\u00xx), 0 for every other byte */
static const unsigned char ESCAPE_EXTRA[256] = {
    5, 5, 5, 5, 5, 5, 5, 5, 1, 1, 1, 5, 1, 1, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
};

/* UTF-8 bytes as a JSON string, escaped as orjson escapes: '"', '\\', and U+0000 to U+001F (\b \t
   \n \f \r by name, the rest as \u00xx) */
static int put_escaped(Buf *b, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t extra = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        extra += ESCAPE_EXTRA[s[i]];
    if (n > PY_SSIZE_T_MAX / 8 || grow(b, n + extra + 2) < 0) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    char *o = b->p + b->n;
    *o++ = '"';
    if (extra == 0) {
        memcpy(o, s, (size_t)n);
        o += n;
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned char c = s[i];
            if (c >= 0x20 && c != '"' && c != '\\') {
                *o++ = (char)c;
                continue;
            }
            *o++ = '\\';
            switch (c) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '\b': *o++ = 'b'; break;
            case '\t': *o++ = 't'; break;
            case '\n': *o++ = 'n'; break;
            case '\f': *o++ = 'f'; break;
            case '\r': *o++ = 'r'; break;
            default:
                *o++ = 'u';
                *o++ = '0';
                *o++ = '0';
                *o++ = HEX[c >> 4];
                *o++ = HEX[c & 15];
            }
        }
    }
    *o++ = '"';
    b->n = o - b->p;
    return 0;
}

/* results of the writing steps: done, an error raised, or the reference decides */
#define OK 0
#define ERR (-1)
#define BACK 1

/* an exact str as a JSON string; BACK where it is not one or has no UTF-8 form (a lone surrogate:
   orjson refuses it and the reference writes it by json) */
static int put_str(Buf *b, PyObject *s) {
    if (!PyUnicode_CheckExact(s))
        return BACK;
    if (PyUnicode_IS_ASCII(s))
        return put_escaped(b, PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s));
    /* a bytes object of its own: the str's cached UTF-8 form would stay with the exchange's strings */
    PyObject *utf8 = PyUnicode_AsUTF8String(s);
    if (utf8 == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return ERR;
        PyErr_Clear();
        return BACK;
    }
    b->ascii = 0;
    int rc = put_escaped(b, (const unsigned char *)PyBytes_AS_STRING(utf8), PyBytes_GET_SIZE(utf8));
    Py_DECREF(utf8);
    return rc;
}

/* a 64-bit integer in decimal (snprintf took most of the document's time for the chunks' columns) */
static int put_ll(Buf *b, long long x) {
    char text[24], *end = text + sizeof text, *at = end;
    unsigned long long u = x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x;
    do {
        *--at = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        *--at = '-';
    return put(b, at, end - at);
}

/* an exact int within 64 bits, signed; BACK for anything else */
static int put_int(Buf *b, PyObject *v) {
    if (!PyLong_CheckExact(v))
        return BACK;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow)
        return BACK;
    if (x == -1 && PyErr_Occurred())
        return ERR;
    return put_ll(b, x);
}

/* a body's bytes as ``"key":"text"`` where they are UTF-8 (nothing where empty); BACK where they
   are not (the reference writes them as base64) */
static int put_body(Buf *b, PyObject *body, const char *key_comma, Py_ssize_t key_len) {
    if (!PyBytes_CheckExact(body))
        return BACK;
    Py_ssize_t n = PyBytes_GET_SIZE(body);
    if (n == 0)
        return OK;
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(body);
    int ascii = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] >= 0x80) {
            ascii = 0;
            break;
        }
    }
    if (!ascii) {
        /* strict UTF-8, as bytes.decode("utf-8") reads it (no surrogates) */
        PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
        if (text == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return ERR;
            PyErr_Clear();
            return BACK;
        }
        Py_DECREF(text);
        b->ascii = 0;
    }
    if (put(b, key_comma, key_len) < 0)
        return ERR;
    return put_escaped(b, s, n);
}

static int ascii_equal_nocase(PyObject *a, PyObject *c) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    if (PyUnicode_GET_LENGTH(c) != n)
        return 0;
    const unsigned char *x = PyUnicode_DATA(a), *y = PyUnicode_DATA(c);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char p = x[i], q = y[i];
        if (p >= 'A' && p <= 'Z')
            p += 32;
        if (q >= 'A' && q <= 'Z')
            q += 32;
        if (p != q)
            return 0;
    }
    return 1;
}

#define MAX_HEADERS 64

/* a header list redacted, as ``_headers_out`` writes it: an object where no two names are the same
   but for case, else [name, value] pairs. Names must be ASCII (what lowering them makes is then
   plain) and each already in the policy's verdicts (looking one up runs no Python code) */
static int put_headers(Buf *b, PyObject *headers, PyObject *verdicts) {
    if (!PyList_CheckExact(headers))
        return BACK;
    Py_ssize_t n = PyList_GET_SIZE(headers);
    if (n > MAX_HEADERS)
        return BACK;
    PyObject *names[MAX_HEADERS], *values[MAX_HEADERS];
    int secret[MAX_HEADERS];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(headers, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
            return BACK;
        names[i] = PyTuple_GET_ITEM(pair, 0);
        values[i] = PyTuple_GET_ITEM(pair, 1);
        if (!PyUnicode_CheckExact(names[i]) || !PyUnicode_IS_ASCII(names[i]) || !PyUnicode_CheckExact(values[i]))
            return BACK;
        /* an exact dict of exact str keys: the lookup runs no Python code */
        PyObject *verdict = PyDict_GetItemWithError(verdicts, names[i]);
        if (verdict == NULL)
            return PyErr_Occurred() ? ERR : BACK; /* a name not seen yet: the reference tests it */
        if (verdict != Py_True && verdict != Py_False)
            return BACK;
        secret[i] = verdict == Py_True;
    }
    int pairs = 0;
    for (Py_ssize_t i = 1; i < n && !pairs; i++)
        for (Py_ssize_t j = 0; j < i; j++)
            if (ascii_equal_nocase(names[i], names[j])) {
                pairs = 1;
                break;
            }
    if (put(b, pairs ? "[" : "{", 1) < 0)
        return ERR;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i && put(b, ",", 1) < 0)
            return ERR;
        if (pairs && put(b, "[", 1) < 0)
            return ERR;
        int rc = put_str(b, names[i]);
        if (rc != OK)
            return rc;
        if (put(b, pairs ? "," : ":", 1) < 0)
            return ERR;
        rc = secret[i] ? PUT(b, "\"[redacted]\"") : put_str(b, values[i]);
        if (rc != OK)
            return rc;
        if (pairs && put(b, "]", 1) < 0)
            return ERR;
    }
    return put(b, pairs ? "]" : "}", 1);
}

/* a streamed response's chunks as ``"stored_chunks":{"t_us":[...],"sizes":[...]}`` and their bytes
   joined into ``*body`` (replaced): chunk_columns' columns, written as they are read, for exact
   Chunks of a float and bytes whose offsets are on its path (BACK for any other); their fields are
   read from their slots, so no Python code runs while the list is read */
static int put_chunks(Buf *b, PyObject *chunks, PyObject **body) {
    if (!PyList_CheckExact(chunks) || chunk_type == NULL || t_ms_offset < 0 || data_offset < 0)
        return BACK;
    Py_ssize_t n = PyList_GET_SIZE(chunks), total = 0;
    if (PUT(b, ",\"stored_chunks\":{\"t_us\":[") < 0)
        return ERR;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *chunk = PyList_GET_ITEM(chunks, i);
        if (!Py_IS_TYPE(chunk, chunk_type))
            return BACK;
        PyObject *t = *(PyObject **)((char *)chunk + t_ms_offset);
        PyObject *data = *(PyObject **)((char *)chunk + data_offset);
        if (t == NULL || data == NULL || !PyBytes_CheckExact(data))
            return BACK;
        long long us = 0;
        int took = us_of(t, &us); /* (a float's own methods at most: the list stays as it is) */
        if (took < 0)
            return ERR;
        if (took == 0 || PyBytes_GET_SIZE(data) > PY_SSIZE_T_MAX - total)
            return BACK;
        total += PyBytes_GET_SIZE(data);
        if ((i && put(b, ",", 1) < 0) || put_ll(b, us) < 0)
            return ERR;
    }
    if (PUT(b, "],\"sizes\":[") < 0)
        return ERR;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *data = *(PyObject **)((char *)PyList_GET_ITEM(chunks, i) + data_offset);
        if ((i && put(b, ",", 1) < 0) || put_ll(b, PyBytes_GET_SIZE(data)) < 0)
            return ERR;
    }
    if (PUT(b, "]}") < 0)
        return ERR;
    PyObject *joined = PyBytes_FromStringAndSize(NULL, total);
    if (joined == NULL)
        return ERR;
    char *at = PyBytes_AS_STRING(joined);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *data = *(PyObject **)((char *)PyList_GET_ITEM(chunks, i) + data_offset);
        memcpy(at, PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data));
        at += PyBytes_GET_SIZE(data);
    }
    Py_SETREF(*body, joined);
    return OK;
}

/* a response held joined (contracts' JoinedResponse: the bytes, each chunk's size, each one's t_ms),
   as put_chunks writes the same chunks: ``"stored_chunks":{...}``, and the bytes themselves as
   ``*body`` (replaced), not copied. BACK where the form is not exactly that (the reference decides) */
static int put_joined(Buf *b, PyObject *joined, PyObject **body) {
    if (!PyTuple_CheckExact(joined) || PyTuple_GET_SIZE(joined) != 3)
        return BACK;
    PyObject *data = PyTuple_GET_ITEM(joined, 0), *sizes = PyTuple_GET_ITEM(joined, 1),
             *times = PyTuple_GET_ITEM(joined, 2);
    if (!PyBytes_CheckExact(data) || !PyList_CheckExact(sizes) || !PyList_CheckExact(times) ||
        PyList_GET_SIZE(sizes) != PyList_GET_SIZE(times))
        return BACK;
    Py_ssize_t n = PyList_GET_SIZE(sizes), total = 0;
    /* the sizes first: each a whole number of bytes, adding up to the bytes held (read once here:
       nothing below runs any code but the floats' own methods, so the lists cannot change while
       they are written) */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *size = PyList_GET_ITEM(sizes, i);
        if (!PyLong_CheckExact(size))
            return BACK;
        Py_ssize_t k = PyLong_AsSsize_t(size);
        if (k < 0 || k > PyBytes_GET_SIZE(data) - total) {
            PyErr_Clear();
            return BACK;
        }
        total += k;
    }
    if (total != PyBytes_GET_SIZE(data))
        return BACK;
    if (PUT(b, ",\"stored_chunks\":{\"t_us\":[") < 0)
        return ERR;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(times, i);
        long long us = 0;
        int took = us_of(t, &us); /* (only the float's own methods run: the lists stay as they are) */
        if (took < 0)
            return ERR;
        if (took == 0)
            return BACK;
        if ((i && put(b, ",", 1) < 0) || put_ll(b, us) < 0)
            return ERR;
    }
    if (PUT(b, "],\"sizes\":[") < 0)
        return ERR;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((i && put(b, ",", 1) < 0) || put_ll(b, PyLong_AsSsize_t(PyList_GET_ITEM(sizes, i))) < 0)
            return ERR;
    if (PUT(b, "]}") < 0)
        return ERR;
    Py_SETREF(*body, Py_NewRef(data));
    return OK;
}

/* the exchange's keys of its own, in their order, less its end time (the row's column, dropped
   from the document): strings, ints, None, booleans, and floats (as orjson writes them) */
static int put_extra(Buf *b, PyObject *extra, PyObject *dumps) {
    if (!PyDict_CheckExact(extra))
        return BACK;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(extra, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key))
            return BACK;
        if (PyUnicode_Compare(key, ended_key) == 0)
            continue;
        int known = PySet_Contains(known_keys, key);
        if (known < 0)
            return ERR;
        if (known)
            return BACK;
        if (put(b, ",", 1) < 0)
            return ERR;
        int rc = put_str(b, key);
        if (rc != OK)
            return rc;
        if (put(b, ":", 1) < 0)
            return ERR;
        if (value == Py_None)
            rc = PUT(b, "null");
        else if (value == Py_True)
            rc = PUT(b, "true");
        else if (value == Py_False)
            rc = PUT(b, "false");
        else if (PyUnicode_CheckExact(value))
            rc = put_str(b, value);
        else if (PyLong_CheckExact(value))
            rc = put_int(b, value);
        else if (PyFloat_CheckExact(value)) {
            /* orjson's own text for it (shortest round trip; NaN and the infinities as null) */
            PyObject *text = PyObject_CallOneArg(dumps, value);
            if (text == NULL)
                return ERR;
            rc = PyBytes_CheckExact(text) ? put(b, PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text)) : BACK;
            Py_DECREF(text);
        } else
            rc = BACK;
        if (rc != OK)
            return rc;
    }
    return OK;
}

/* the document's text of one exchange: OK with ``*body`` set (a new reference, None where the
   row has no body), or ERR, or BACK */
static int write_row(Buf *b, PyObject **fields, PyObject *req, PyObject *path, PyObject *verdicts,
                     PyObject *dumps, PyObject **body) {
    int rc = OK;
    PyObject *q[Q_N] = {NULL}, *r[R_N] = {NULL}, *joined = NULL;
    PyObject *resp = fields[X_RESPONSE];
    for (int i = 0; i < Q_N; i++)
        if ((q[i] = slot(req, q_off[i])) == NULL) {
            rc = BACK;
            goto done;
        }
    if (resp != Py_None && joined_off >= 0 && Py_IS_TYPE(resp, joined_type)) {
        /* held joined (the compiled relay's record, a row read back): its own slot, not chunks */
        for (int i = 0; i < R_CHUNKS; i++)
            if ((r[i] = slot(resp, r_off[i])) == NULL) {
                rc = BACK;
                goto done;
            }
        if ((joined = slot(resp, joined_off)) == NULL || joined == Py_None) {
            rc = BACK;
            goto done;
        }
    } else if (resp != Py_None) {
        if (!Py_IS_TYPE(resp, response_type)) {
            rc = BACK;
            goto done;
        }
        for (int i = 0; i < R_N; i++)
            if ((r[i] = slot(resp, r_off[i])) == NULL) {
                rc = BACK;
                goto done;
            }
    }
    if (PUT(b, "{\"v\":1,\"id\":") < 0 || (rc = put_str(b, fields[X_ID])) != OK)
        goto fail_or;
    if (PUT(b, ",\"tap\":") < 0 || (rc = put_str(b, fields[X_TAP])) != OK)
        goto fail_or;
    if (fields[X_CORRELATION] != Py_None &&
        (PUT(b, ",\"correlation\":") < 0 || (rc = put_str(b, fields[X_CORRELATION])) != OK))
        goto fail_or;
    if (fields[X_STARTED] != Py_None &&
        (PUT(b, ",\"started_at\":") < 0 || (rc = put_str(b, fields[X_STARTED])) != OK))
        goto fail_or;
    if (PUT(b, ",\"request\":{\"method\":") < 0 || (rc = put_str(b, q[Q_METHOD])) != OK)
        goto fail_or;
    if (PUT(b, ",\"path\":") < 0 || (rc = put_str(b, path)) != OK)
        goto fail_or;
    if (PUT(b, ",\"headers\":") < 0 || (rc = put_headers(b, q[Q_HEADERS], verdicts)) != OK)
        goto fail_or;
    if ((rc = put_body(b, q[Q_BODY], ",\"body_text\":", 13)) != OK || PUT(b, "}") < 0)
        goto fail_or;
    *body = Py_NewRef(Py_None);
    if (resp != Py_None) {
        if (PUT(b, ",\"response\":{\"status\":") < 0 || (rc = put_int(b, r[R_STATUS])) != OK)
            goto fail_or;
        if (PUT(b, ",\"headers\":") < 0 || (rc = put_headers(b, r[R_HEADERS], verdicts)) != OK)
            goto fail_or;
        if (joined != NULL) {
            if ((rc = put_joined(b, joined, body)) != OK)
                goto fail_or;
        } else if (r[R_CHUNKS] == Py_None) {
            if ((rc = put_body(b, r[R_BODY], ",\"body_text\":", 13)) != OK)
                goto fail_or;
        } else {
            if ((rc = put_chunks(b, r[R_CHUNKS], body)) != OK)
                goto fail_or;
        }
        if (PUT(b, "}") < 0)
            goto fail;
    }
    if ((rc = put_extra(b, fields[X_EXTRA], dumps)) != OK || PUT(b, "}") < 0)
        goto fail_or;
    rc = OK;
    goto done;
fail:
    rc = ERR;
    goto done;
fail_or:
    if (rc == OK) /* the PUT failed */
        rc = ERR;
done:
    if (rc != OK && *body != NULL)
        Py_CLEAR(*body);
    for (int i = 0; i < Q_N; i++)
        Py_XDECREF(q[i]);
    for (int i = 0; i < R_N; i++)
        Py_XDECREF(r[i]);
    Py_XDECREF(joined);
    return rc;
}

/* row_text(ex, verdicts, target, dumps) -> (text, body, path) | None */
static PyObject *row_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "row_text() takes four arguments: ex, verdicts, target, dumps");
        return NULL;
    }
    PyObject *ex = args[0], *verdicts = args[1], *target = args[2], *dumps = args[3];
    if (exchange_type == NULL || !Py_IS_TYPE(ex, exchange_type) || !PyDict_CheckExact(verdicts))
        Py_RETURN_NONE;
    PyObject *fields[X_N] = {NULL}, *path = NULL, *body = NULL, *result = NULL;
    Buf b;
    b.p = b.small;
    b.n = 0;
    b.cap = (Py_ssize_t)sizeof b.small;
    b.ascii = 1;
    int rc = BACK;
    for (int i = 0; i < X_N; i++)
        if ((fields[i] = slot(ex, x_off[i])) == NULL)
            goto done;
    PyObject *req = fields[X_REQUEST];
    if (fields[X_ERROR] != Py_None || !Py_IS_TYPE(req, request_type))
        goto done;
    /* the target redacted first (the one step that may run Python code): a query, or an absolute
       URL, by the policy's own method; a plain path is its own */
    PyObject *raw = *(PyObject **)((char *)req + q_off[Q_PATH]);
    if (raw == NULL || !PyUnicode_CheckExact(raw))
        goto done;
    Py_ssize_t len = PyUnicode_GET_LENGTH(raw);
    Py_ssize_t mark = PyUnicode_FindChar(raw, '?', 0, len, 1);
    Py_ssize_t url = mark == -1 ? PyUnicode_Find(raw, scheme_mark, 0, len, 1) : 0;
    if (mark == -2 || url == -2) {
        rc = ERR;
        goto done;
    }
    if (mark == -1 && url == -1)
        path = Py_NewRef(raw);
    else if ((path = PyObject_CallOneArg(target, raw)) == NULL) {
        rc = ERR;
        goto done;
    }
    if (!PyUnicode_CheckExact(path))
        goto done;
    rc = write_row(&b, fields, req, path, verdicts, dumps, &body);
    if (rc != OK)
        goto done;
    PyObject *text = b.ascii ? PyUnicode_New(b.n, 127) : PyUnicode_DecodeUTF8(b.p, b.n, NULL);
    if (text == NULL) {
        rc = ERR;
        goto done;
    }
    if (b.ascii)
        memcpy(PyUnicode_DATA(text), b.p, (size_t)b.n);
    result = PyTuple_New(3);
    if (result == NULL) {
        Py_DECREF(text);
        rc = ERR;
        goto done;
    }
    PyTuple_SET_ITEM(result, 0, text);
    PyTuple_SET_ITEM(result, 1, body);
    PyTuple_SET_ITEM(result, 2, path);
    body = path = NULL;
done:
    if (b.p != b.small)
        PyMem_Free(b.p);
    for (int i = 0; i < X_N; i++)
        Py_XDECREF(fields[i]);
    Py_XDECREF(path);
    Py_XDECREF(body);
    if (rc == ERR)
        return NULL;
    if (rc == BACK)
        Py_RETURN_NONE;
    return result;
}

/* ---- reading a row: the compiled twin of record/_rows.py's ``_plain_row_py``.

A row's document, parsed, in the plain shape the store writes (every value of the type the
interchange form asks, no error, no keys of its own) made into the exchange at once: its objects
allocated by their classes and their slots written, as the reference writes them. Anything this does
not take answers None, and the reference reads that document (and says whether it is plain): so this
never decides a row is not plain, and what it makes is what the reference makes. */

static PyObject *k_v, *k_id, *k_tap, *k_correlation, *k_started, *k_request, *k_response, *k_method,
    *k_path, *k_headers, *k_body_text, *k_status, *k_stored, *k_t_us, *k_sizes, *k_upper, *d_caller,
    *d_post, *d_chat_path, *d_empty;
static PyObject *plain_top, *plain_request, *plain_streamed, *plain_answer;
static Py_ssize_t jchunks_off = -1;

/* 1 where every key of ``d`` is one of ``allowed``, 0 where one is not, -1 with an error set */
static int keys_within(PyObject *d, PyObject *allowed) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &key, &value)) {
        int in = PySet_Contains(allowed, key);
        if (in <= 0)
            return in;
    }
    return 1;
}

/* d.get(key, dflt), borrowed; NULL only with an error set */
static PyObject *get_or(PyObject *d, PyObject *key, PyObject *dflt) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    return v != NULL || PyErr_Occurred() ? v : dflt;
}

/* ``_plain_headers``: a new list of (name, value) tuples, or NULL (an error set, or not plain) */
static PyObject *plain_headers(PyObject *value) {
    if (value == NULL || value == Py_None)
        return PyList_New(0);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    if (PyDict_CheckExact(value)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(value, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v))
                goto not_plain;
            PyObject *pair = PyTuple_Pack(2, k, v);
            if (pair == NULL || PyList_Append(out, pair) < 0) {
                Py_XDECREF(pair);
                goto fail;
            }
            Py_DECREF(pair);
        }
        return out;
    }
    if (!PyList_CheckExact(value))
        goto not_plain;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
        PyObject *item = PyList_GET_ITEM(value, i);
        if (!PyList_CheckExact(item) || PyList_GET_SIZE(item) != 2 ||
            !PyUnicode_CheckExact(PyList_GET_ITEM(item, 0)) || !PyUnicode_CheckExact(PyList_GET_ITEM(item, 1)))
            goto not_plain;
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(item, 0), PyList_GET_ITEM(item, 1));
        if (pair == NULL || PyList_Append(out, pair) < 0) {
            Py_XDECREF(pair);
            goto fail;
        }
        Py_DECREF(pair);
    }
    return out;
not_plain:
fail:
    Py_DECREF(out);
    return NULL;
}

/* a new instance of a checked slotted class, its slots unset */
static PyObject *bare(PyTypeObject *type) {
    return type->tp_alloc(type, 0);
}

/* writes ``value`` (stolen) into a bare object's slot */
static void put_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) {
    PyObject **at = (PyObject **)((char *)obj + offset);
    Py_XSETREF(*at, value);
}

static PyObject *encoded(PyObject *text) {
    return PyUnicode_AsEncodedString(text, "utf-8", "surrogateescape");
}

/* plain_row(obj, body) -> Exchange | None */
static PyObject *plain_row(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "plain_row() takes two arguments: the document and the body");
        return NULL;
    }
    PyObject *obj = args[0], *body = args[1];
    if (exchange_type == NULL || joined_off < 0 || jchunks_off < 0 || !PyDict_CheckExact(obj) ||
        (body != Py_None && !PyBytes_CheckExact(body)))
        Py_RETURN_NONE;
    int in = keys_within(obj, plain_top);
    if (in <= 0)
        return in < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *v = get_or(obj, k_v, NULL), *ex_id = get_or(obj, k_id, Py_None), *tap = get_or(obj, k_tap, d_caller),
             *req = get_or(obj, k_request, Py_None), *resp = get_or(obj, k_response, Py_None),
             *corr = get_or(obj, k_correlation, Py_None), *started = get_or(obj, k_started, Py_None);
    if (PyErr_Occurred())
        return NULL;
    if (v != NULL) { /* obj.get("v", 1) is exactly the int 1 */
        int overflow = 0;
        if (!PyLong_CheckExact(v) || PyLong_AsLongAndOverflow(v, &overflow) != 1 || overflow)
            Py_RETURN_NONE;
    }
    if (!PyUnicode_CheckExact(ex_id) || !PyUnicode_CheckExact(tap) || PyUnicode_GET_LENGTH(tap) == 0 ||
        !PyDict_CheckExact(req) || (corr != Py_None && !PyUnicode_CheckExact(corr)) ||
        (started != Py_None && !PyUnicode_CheckExact(started)))
        Py_RETURN_NONE;
    if ((in = keys_within(req, plain_request)) <= 0)
        return in < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *method = get_or(req, k_method, d_post), *path = get_or(req, k_path, d_chat_path),
             *text = get_or(req, k_body_text, d_empty);
    if (PyErr_Occurred())
        return NULL;
    if (!PyUnicode_CheckExact(method) || PyUnicode_GET_LENGTH(method) == 0 || !PyUnicode_CheckExact(path) ||
        PyUnicode_GET_LENGTH(path) == 0 || !PyUnicode_CheckExact(text))
        Py_RETURN_NONE;
    PyObject *request = NULL, *response = NULL, *headers = NULL, *got = NULL, *joined = NULL;
    PyObject *req_headers = get_or(req, k_headers, Py_None);
    if (req_headers == NULL || (headers = plain_headers(req_headers)) == NULL)
        goto out;
    if ((request = bare(request_type)) == NULL)
        goto out;
    put_slot(request, q_off[Q_HEADERS], headers);
    headers = NULL;
    PyObject *upper = PyObject_CallMethodNoArgs(method, k_upper);
    if (upper == NULL)
        goto out;
    put_slot(request, q_off[Q_METHOD], upper);
    put_slot(request, q_off[Q_PATH], Py_NewRef(path));
    PyObject *req_body = encoded(text);
    if (req_body == NULL)
        goto out;
    put_slot(request, q_off[Q_BODY], req_body);
    if (resp != Py_None) {
        PyObject *status = PyDict_CheckExact(resp) ? get_or(resp, k_status, Py_None) : Py_None;
        if (status == NULL || !PyLong_CheckExact(status))
            goto out;
        PyObject *resp_headers = get_or(resp, k_headers, Py_None);
        if (resp_headers == NULL || (headers = plain_headers(resp_headers)) == NULL)
            goto out;
        if (body == Py_None) {
            if ((in = keys_within(resp, plain_answer)) <= 0)
                goto out;
            PyObject *answer = get_or(resp, k_body_text, d_empty);
            if (answer == NULL || !PyUnicode_CheckExact(answer) || (response = bare(response_type)) == NULL)
                goto out;
            PyObject *resp_body = encoded(answer);
            if (resp_body == NULL)
                goto out;
            put_slot(response, r_off[R_BODY], resp_body);
            put_slot(response, r_off[R_CHUNKS], Py_NewRef(Py_None));
        } else {
            if ((in = keys_within(resp, plain_streamed)) <= 0)
                goto out;
            PyObject *stored = get_or(resp, k_stored, Py_None);
            if (stored == NULL || !PyDict_CheckExact(stored))
                goto out;
            PyObject *times = get_or(stored, k_t_us, NULL), *sizes = get_or(stored, k_sizes, NULL);
            if (times == NULL || sizes == NULL)
                goto out;
            PyObject *three[3] = {times, sizes, body};
            if ((joined = rows_joined(NULL, three, 3)) == NULL || joined == Py_None)
                goto out;
            if ((response = bare(joined_type)) == NULL)
                goto out;
            put_slot(response, r_off[R_BODY], PyBytes_FromStringAndSize(NULL, 0));
            put_slot(response, jchunks_off, Py_NewRef(Py_None));
            put_slot(response, joined_off, joined);
            joined = NULL;
        }
        put_slot(response, r_off[R_STATUS], Py_NewRef(status));
        put_slot(response, r_off[R_HEADERS], headers);
        headers = NULL;
    } else if (body != Py_None)
        goto out;
    PyObject *extra = PyDict_New();
    if (extra == NULL || (got = bare(exchange_type)) == NULL) {
        Py_XDECREF(extra);
        goto out;
    }
    put_slot(got, x_off[X_ID], Py_NewRef(ex_id));
    put_slot(got, x_off[X_TAP], Py_NewRef(tap));
    put_slot(got, x_off[X_REQUEST], Py_NewRef(request));
    put_slot(got, x_off[X_RESPONSE], Py_NewRef(response == NULL ? Py_None : response));
    put_slot(got, x_off[X_CORRELATION], Py_NewRef(corr));
    put_slot(got, x_off[X_STARTED], Py_NewRef(started));
    put_slot(got, x_off[X_ERROR], Py_NewRef(Py_None));
    put_slot(got, x_off[X_EXTRA], extra);
out:
    Py_XDECREF(request);
    Py_XDECREF(response);
    Py_XDECREF(headers);
    Py_XDECREF(joined);
    if (got != NULL)
        return got;
    return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

static PyMethodDef methods[] = {
    {"chunk_columns", chunk_columns, METH_O,
     "A response's chunks as a row keeps them: (whole microseconds, sizes, bytes joined), or None "
     "where the Python reference decides (record/_rows.py)."},
    {"joined", (PyCFunction)(void (*)(void))rows_joined, METH_FASTCALL,
     "joined(times, sizes, data): (data, sizes, times / 1000.0) where they are plainly right, else None"},
    {"plain_row", (PyCFunction)(void (*)(void))plain_row, METH_FASTCALL,
     "plain_row(document, body): the exchange of a document of the plain shape, or None where the Python "
     "reference reads it (record/_rows.py)"},
    {"row_text", (PyCFunction)(void (*)(void))row_text, METH_FASTCALL,
     "row_text(ex, verdicts, target, dumps): (the row's document text, its body, the redacted path), "
     "or None where the Python reference writes the row (record/_rows.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rows_c", "The compiled twin of record/_rows.py's chunk columns.", -1,
    methods,
};

/* the exchange's classes and where they keep their fields, for row_text (which answers None for
   every exchange where one is not a plain slotted class) */
static int row_classes(PyObject *contracts) {
    known_keys = Py_BuildValue("{ssssssssssssssss}", "v", "", "id", "", "tap", "", "correlation", "",
                               "started_at", "", "request", "", "response", "", "error", "");
    if (known_keys == NULL)
        return -1;
    Py_SETREF(known_keys, PyFrozenSet_New(known_keys));
    ended_key = PyUnicode_InternFromString("_ended_mono");
    scheme_mark = PyUnicode_InternFromString("://");
    if (known_keys == NULL || ended_key == NULL || scheme_mark == NULL)
        return -1;
    const char *classes[3] = {"Exchange", "HttpRequest", "HttpResponse"};
    PyTypeObject **types[3] = {&exchange_type, &request_type, &response_type};
    const char **names[3] = {x_names, q_names, r_names};
    Py_ssize_t *offsets[3] = {x_off, q_off, r_off};
    int counts[3] = {X_N, Q_N, R_N};
    int usable = 1;
    for (int i = 0; i < 3; i++) {
        PyObject *type = PyObject_GetAttrString(contracts, classes[i]);
        if (type == NULL)
            return -1;
        if (!PyType_Check(type) || !slots_of(type, names[i], offsets[i], counts[i]))
            usable = 0;
        *types[i] = (PyTypeObject *)type; /* kept for the module's life */
    }
    if (!usable)
        exchange_type = NULL; /* row_text answers None for everything */
    PyObject *joined = PyObject_GetAttrString(contracts, "JoinedResponse");
    if (joined == NULL)
        return -1;
    if (PyType_Check(joined) && PyType_IsSubtype((PyTypeObject *)joined, response_type))
        joined_off = slot_offset(joined, "_joined");
    joined_type = (PyTypeObject *)joined; /* kept for the module's life */
    if (joined_off >= 0)
        jchunks_off = slot_offset(joined, "_chunks");
    struct {
        PyObject **at;
        const char *text;
    } const keys[] = {
        {&k_v, "v"}, {&k_id, "id"}, {&k_tap, "tap"}, {&k_correlation, "correlation"}, {&k_started, "started_at"},
        {&k_request, "request"}, {&k_response, "response"}, {&k_method, "method"}, {&k_path, "path"},
        {&k_headers, "headers"}, {&k_body_text, "body_text"}, {&k_status, "status"}, {&k_stored, "stored_chunks"},
        {&k_t_us, "t_us"}, {&k_sizes, "sizes"}, {&k_upper, "upper"}, {&d_caller, "caller"}, {&d_post, "POST"},
        {&d_chat_path, "/v1/chat/completions"}, {&d_empty, ""},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if ((*keys[i].at = PyUnicode_InternFromString(keys[i].text)) == NULL)
            return -1;
    plain_top = Py_BuildValue("(OOOOOOO)", k_v, k_id, k_tap, k_correlation, k_started, k_request, k_response);
    plain_request = Py_BuildValue("(OOOO)", k_method, k_path, k_headers, k_body_text);
    plain_streamed = Py_BuildValue("(OOO)", k_status, k_headers, k_stored);
    plain_answer = Py_BuildValue("(OOO)", k_status, k_headers, k_body_text);
    PyObject **sets[4] = {&plain_top, &plain_request, &plain_streamed, &plain_answer};
    for (int i = 0; i < 4; i++) {
        if (*sets[i] == NULL)
            return -1;
        Py_SETREF(*sets[i], PyFrozenSet_New(*sets[i]));
        if (*sets[i] == NULL)
            return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__rows_c(void) {
    name_t_ms = PyUnicode_InternFromString("t_ms");
    name_data = PyUnicode_InternFromString("data");
    if (name_t_ms == NULL || name_data == NULL)
        return NULL;
    PyObject *contracts = PyImport_ImportModule("wirecheck.contracts");
    if (contracts == NULL)
        return NULL;
    PyObject *chunk = PyObject_GetAttrString(contracts, "Chunk");
    if (chunk == NULL) {
        Py_DECREF(contracts);
        return NULL;
    }
    if (row_classes(contracts) < 0) {
        Py_DECREF(contracts);
        Py_DECREF(chunk);
        return NULL;
    }
    Py_DECREF(contracts);
    if (PyType_Check(chunk)) {
        chunk_type = (PyTypeObject *)chunk; /* kept for the module's life */
        t_ms_offset = slot_offset(chunk, "t_ms");
        data_offset = slot_offset(chunk, "data");
    } else {
        Py_DECREF(chunk);
    }
    return PyModule_Create(&module);
}
