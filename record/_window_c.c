/* The compiled twin of record/_window.py's ``_keep_py``: of the last window's rows, those that
started within the part of the next window it covered, with their (id, version) pairs and the sum
of their checksums.

The last window holds thousands of rows, each looked at once a batch. In Python the filter, the sum
and the pairs were three passes at several hundred instructions a row (a tuple unpacked, two string
comparisons, a list appended to); here it is one pass that makes no object but the two lists. Rows
are taken as ``_window.py`` made them (tuples of seq, id, version, started_at, checksum, the
started_at a str, the checksum an int under 2**31); anything else raises TypeError, which the
caller turns into a whole read. The GIL is held throughout. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* keep(rows, pairs, a, b) -> (kept rows, kept pairs, sum of their checksums) */
static PyObject *
window_keep(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "keep() takes four arguments: rows, pairs, a, b");
        return NULL;
    }
    PyObject *rows = args[0], *pairs = args[1], *a = args[2], *b = args[3];
    if (!PyList_CheckExact(rows) || !PyList_CheckExact(pairs) || !PyUnicode_CheckExact(a) ||
        !PyUnicode_CheckExact(b) || PyList_GET_SIZE(rows) != PyList_GET_SIZE(pairs)) {
        PyErr_SetString(PyExc_TypeError, "keep() takes two lists of one length and two str");
        return NULL;
    }
    PyObject *kept = PyList_New(0);
    PyObject *kept_pairs = PyList_New(0);
    if (kept == NULL || kept_pairs == NULL) {
        goto fail;
    }
    long long sum = 0;
    /* both lengths asked again at each row: nothing here runs Python code, but a list appended to
       may be reallocated, and a row is read only where both lists still hold it */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows) && i < PyList_GET_SIZE(pairs); i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 5) {
            PyErr_SetString(PyExc_TypeError, "a window row is a tuple of five");
            goto fail;
        }
        PyObject *started = PyTuple_GET_ITEM(row, 3), *check = PyTuple_GET_ITEM(row, 4);
        if (!PyUnicode_CheckExact(started) || !PyLong_CheckExact(check)) {
            PyErr_SetString(PyExc_TypeError, "a window row's start is a str and its checksum an int");
            goto fail;
        }
        /* a <= started <= b, as str compares (code points: SQLite's BINARY text order) */
        int lo = PyUnicode_Compare(a, started);
        if (lo == -1 && PyErr_Occurred()) {
            goto fail;
        }
        if (lo > 0) {
            continue;
        }
        int hi = PyUnicode_Compare(started, b);
        if (hi == -1 && PyErr_Occurred()) {
            goto fail;
        }
        if (hi > 0) {
            continue;
        }
        int overflow = 0;
        long long c = PyLong_AsLongLongAndOverflow(check, &overflow);
        if (c == -1 && PyErr_Occurred()) {
            goto fail;
        }
        /* each checksum is under 2**31 in size: no sum of a list that fits in memory overflows */
        if (overflow != 0 || c > 0x7fffffffLL || c < -0x7fffffffLL) {
            PyErr_SetString(PyExc_TypeError, "a window row's checksum is out of its range");
            goto fail;
        }
        sum += c;
        if (PyList_Append(kept, row) < 0 || PyList_Append(kept_pairs, PyList_GET_ITEM(pairs, i)) < 0) {
            goto fail;
        }
    }
    PyObject *total = PyLong_FromLongLong(sum);
    if (total == NULL) {
        goto fail;
    }
    PyObject *out = PyTuple_New(3);
    if (out == NULL) {
        Py_DECREF(total);
        goto fail;
    }
    PyTuple_SET_ITEM(out, 0, kept);
    PyTuple_SET_ITEM(out, 1, kept_pairs);
    PyTuple_SET_ITEM(out, 2, total);
    return out;
fail:
    Py_XDECREF(kept);
    Py_XDECREF(kept_pairs);
    return NULL;
}

static PyMethodDef window_methods[] = {
    {"keep", (PyCFunction)(void (*)(void))window_keep, METH_FASTCALL,
     "keep(rows, pairs, a, b): the rows started within [a, b], their pairs, the sum of their checksums"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef window_module = {
    PyModuleDef_HEAD_INIT, "_window_c", "The compiled twin of record/_window.py's filter of the last window.", 0,
    window_methods,
};

PyMODINIT_FUNC
PyInit__window_c(void)
{
    return PyModuleDef_Init(&window_module);
}
