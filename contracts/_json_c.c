/* The compiled twin of contracts/_json.py's depth bound on a parsed document (``depth_exceeds``,
 * the reference, which walks the value): the same answer from the document's text.
 *
 * deeper(text, bound) -> True | False | None
 *
 * Whether the text's objects and arrays nest deeper than ``bound``: its brackets counted outside
 * its strings, in one pass over the text, where the walk made a tuple for every container of the
 * value (a request of 50 KB with an agent's tools: three quarters of building its view). Asked only
 * of a text bounded loads has read: for such a text its nesting is the value's. None where the text
 * cannot tell: bytes with a NUL (UTF-16 or UTF-32, which json reads and whose code units hold
 * bracket bytes that are not brackets), or a text of another type; the caller walks the value then.
 *
 * Never crashes on input: every read is within the text's length, and no state is kept between
 * calls. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* the scan, for any of a str's kinds or for bytes (read as ASCII: UTF-8's other bytes are never a
 * bracket, a quote or a backslash) */
#define SCAN(READ)                                                                                         \
    do {                                                                                                   \
        int in_string = 0;                                                                                 \
        long long depth = 0;                                                                               \
        for (Py_ssize_t i = 0; i < n; i++) {                                                               \
            Py_UCS4 c = READ(i);                                                                           \
            if (in_string) {                                                                               \
                if (c == '\\')                                                                             \
                    i++; /* the escaped character, whatever it is */                                       \
                else if (c == '"')                                                                         \
                    in_string = 0;                                                                         \
            } else if (c == '"') {                                                                         \
                in_string = 1;                                                                             \
            } else if (c == '[' || c == '{') {                                                             \
                if (++depth > bound)                                                                       \
                    Py_RETURN_TRUE;                                                                        \
            } else if (c == ']' || c == '}') {                                                             \
                depth--;                                                                                   \
            }                                                                                              \
        }                                                                                                  \
        Py_RETURN_FALSE;                                                                                   \
    } while (0)

static PyObject *
json_deeper(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "deeper() takes a text and an int bound");
        return NULL;
    }
    long long bound = PyLong_AsLongLong(args[1]);
    if (bound == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *text = args[0];
    if (PyUnicode_CheckExact(text)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
#define READ_STR(i) PyUnicode_READ(kind, data, (i))
        SCAN(READ_STR);
#undef READ_STR
    }
    const unsigned char *bytes;
    Py_ssize_t n;
    if (PyBytes_CheckExact(text)) {
        bytes = (const unsigned char *)PyBytes_AS_STRING(text);
        n = PyBytes_GET_SIZE(text);
    } else if (PyByteArray_CheckExact(text)) {
        bytes = (const unsigned char *)PyByteArray_AS_STRING(text);
        n = PyByteArray_GET_SIZE(text);
    } else {
        Py_RETURN_NONE;
    }
    if (n > 0 && memchr(bytes, 0, (size_t)n) != NULL) {
        Py_RETURN_NONE; /* UTF-16 or UTF-32: the value is walked */
    }
#define READ_BYTES(i) ((Py_UCS4)bytes[(i)])
    SCAN(READ_BYTES);
#undef READ_BYTES
}

static PyMethodDef json_methods[] = {
    {"deeper", (PyCFunction)(void (*)(void))json_deeper, METH_FASTCALL,
     "deeper(text, bound): whether the text's brackets outside its strings nest deeper than bound; None: "
     "the text cannot tell"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef json_module = {
    PyModuleDef_HEAD_INIT, "_json_c", "The compiled twin of contracts/_json.py's depth bound.", 0, json_methods,
};

PyMODINIT_FUNC
PyInit__json_c(void)
{
    return PyModuleDef_Init(&json_module);
}
