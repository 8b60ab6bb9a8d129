/* The compiled twin of the header lines of a message head, once an exchange each way: the upstream
 * request's (proxy/_upstream.py, _Raw.open) and the caller's response's (proxy/_http.py,
 * _Cycle._start). In Python each header was a few list items and, for a response, two regular
 * expression searches, a lower() and three comparisons; here each is one pass over its bytes and
 * one copy, and no object is made but the lines.
 *
 * request_lines(headers) -> bytes | None: each ``name: value\r\n`` as given.
 * response_lines(headers) -> bytes | None: the same with each name in lower case, for a response
 * whose framing the headers do not touch: None where a name or a value holds a character the
 * Python path refuses (it then raises its error), where a header is content-length,
 * transfer-encoding or connection (their meaning is the Python path's), or where the list is not a
 * list of pairs of bytes. The Python path then does the head; tests/proxy/test_heads_c.py holds
 * the two to the same bytes and the same state. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* the characters _BAD_NAME and _BAD_VALUE match (proxy/_http.py): controls and RFC 9110's
 * separators in a name, controls but tab in a value */
static int bad_name_char(unsigned char c) {
    return c <= 0x1f || c == 0x7f || (c != 0 && strchr("()<>@,;:[]={} \t\\\"", c) != NULL);
}

static int bad_value_char(unsigned char c) { return (c <= 0x1f && c != '\t') || c == 0x7f; }

/* whether ``name`` (``len`` bytes) in lower case is ``word`` (lower case already) */
static int is_lower(const char *name, Py_ssize_t len, const char *word) {
    if ((size_t)len != strlen(word))
        return 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (c != (unsigned char)word[i])
            return 0;
    }
    return 1;
}

/* the pair at ``i`` as two exact bytes objects (borrowed), or 0 */
static int pair_at(PyObject *headers, Py_ssize_t i, PyObject **name, PyObject **value) {
    PyObject *item = PyList_GET_ITEM(headers, i);
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2)
        return 0;
    *name = PyTuple_GET_ITEM(item, 0);
    *value = PyTuple_GET_ITEM(item, 1);
    return PyBytes_CheckExact(*name) && PyBytes_CheckExact(*value);
}

static PyObject *lines(PyObject *headers, int response) {
    if (!PyList_CheckExact(headers))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(headers), total = 0;
    PyObject *name, *value;
    /* first the checks and the size: nothing here runs Python code or allocates */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!pair_at(headers, i, &name, &value))
            Py_RETURN_NONE;
        const char *k = PyBytes_AS_STRING(name), *v = PyBytes_AS_STRING(value);
        Py_ssize_t klen = PyBytes_GET_SIZE(name), vlen = PyBytes_GET_SIZE(value);
        if (response) {
            for (Py_ssize_t j = 0; j < klen; j++)
                if (bad_name_char((unsigned char)k[j]))
                    Py_RETURN_NONE;
            for (Py_ssize_t j = 0; j < vlen; j++)
                if (bad_value_char((unsigned char)v[j]))
                    Py_RETURN_NONE;
            if (is_lower(k, klen, "content-length") || is_lower(k, klen, "transfer-encoding") ||
                is_lower(k, klen, "connection"))
                Py_RETURN_NONE;
        }
        /* in size_t, where the sum of two sizes cannot wrap */
        size_t line = (size_t)klen + (size_t)vlen + 4;
        if (line > (size_t)PY_SSIZE_T_MAX - (size_t)total)
            Py_RETURN_NONE; /* past any size a head can have: the Python path says so */
        total += (Py_ssize_t)line;
    }
    /* a bytes object is not tracked by the cyclic GC, so making it runs no finalizer: the list and
     * its items are as they were; each copy is still checked against the room left */
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    char *at = PyBytes_AS_STRING(out), *end = at + total;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PyList_GET_SIZE(headers) || !pair_at(headers, i, &name, &value))
            goto changed;
        Py_ssize_t klen = PyBytes_GET_SIZE(name), vlen = PyBytes_GET_SIZE(value);
        if ((size_t)(end - at) < (size_t)klen + (size_t)vlen + 4)
            goto changed;
        memcpy(at, PyBytes_AS_STRING(name), (size_t)klen);
        if (response)
            for (Py_ssize_t j = 0; j < klen; j++)
                if (at[j] >= 'A' && at[j] <= 'Z')
                    at[j] = (char)(at[j] - 'A' + 'a');
        at += klen;
        memcpy(at, ": ", 2);
        at += 2;
        memcpy(at, PyBytes_AS_STRING(value), (size_t)vlen);
        at += vlen;
        memcpy(at, "\r\n", 2);
        at += 2;
    }
    if (at != end)
        goto changed;
    return out;
changed:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyObject *request_lines(PyObject *self, PyObject *headers) { return lines(headers, 0); }

static PyObject *response_lines(PyObject *self, PyObject *headers) { return lines(headers, 1); }

static PyMethodDef methods[] = {
    {"request_lines", request_lines, METH_O,
     "Each (name, value) of a list of pairs of bytes as b'name: value\\r\\n', joined; None for "
     "any other shape."},
    {"response_lines", response_lines, METH_O,
     "The same with names in lower case, or None where the Python path decides (a character it "
     "refuses, a header of the framing, another shape)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_heads_c", "The compiled twin of a message head's header lines.", -1, methods,
};

PyMODINIT_FUNC PyInit__heads_c(void) { return PyModule_Create(&module); }
