/* The compiled twin of record/_rows.py's ``_joined`` (reading a streamed response's stored chunks).

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

#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

static PyMethodDef rows_methods[] = {
    {"joined", (PyCFunction)(void (*)(void))rows_joined, METH_FASTCALL,
     "joined(times, sizes, data): (data, sizes, times / 1000.0) where they are plainly right, else None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef rows_module = {
    PyModuleDef_HEAD_INIT, "_rows_c", "The compiled twin of record/_rows.py's reading of stored chunks.", 0,
    rows_methods,
};

PyMODINIT_FUNC
PyInit__rows_c(void)
{
    return PyModuleDef_Init(&rows_module);
}
