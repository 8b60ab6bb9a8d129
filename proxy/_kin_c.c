/* The compiled twin of proxy/_kin.py's ``_owners_py``: the positions of a window's kin by each of
their own keys' hashes.

With several taps the live checker indexes every exchange of a batch's window (thousands a batch)
by its own kin keys, six or so each: in Python a ``setdefault`` and an ``append`` a key, about 8k
instructions an exchange of the window, the largest part of finding a batch's group. Here it is one
pass that makes only the index's lists and the positions. The kin are taken as _kin.py makes them
(an ``own`` attribute, a tuple of ints); anything else raises TypeError, as the reference does. The
GIL is held throughout. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* owners(kin) -> {hash: [positions]} */
static PyObject *
kin_owners(PyObject *module, PyObject *kin)
{
    (void)module;
    if (!PyList_CheckExact(kin)) {
        PyErr_SetString(PyExc_TypeError, "owners() takes a list of kin");
        return NULL;
    }
    PyObject *name = PyUnicode_InternFromString("own");
    if (name == NULL) {
        return NULL;
    }
    PyObject *owners = PyDict_New();
    if (owners == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    for (Py_ssize_t n = 0; n < PyList_GET_SIZE(kin); n++) {
        /* held while its attribute is read: reading it may run code that changes the list */
        PyObject *item = PyList_GET_ITEM(kin, n);
        Py_INCREF(item);
        PyObject *own = PyObject_GetAttr(item, name);
        Py_DECREF(item);
        if (own == NULL) {
            goto fail;
        }
        if (!PyTuple_CheckExact(own)) {
            Py_DECREF(own);
            PyErr_SetString(PyExc_TypeError, "a kin's own keys are a tuple");
            goto fail;
        }
        PyObject *position = NULL;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(own); i++) {
            PyObject *h = PyTuple_GET_ITEM(own, i);
            if (!PyLong_CheckExact(h)) {
                PyErr_SetString(PyExc_TypeError, "a kin key's hash is an int");
                goto fail_own;
            }
            PyObject *list = PyDict_GetItemWithError(owners, h); /* borrowed */
            if (list == NULL) {
                if (PyErr_Occurred()) {
                    goto fail_own;
                }
                list = PyList_New(0);
                if (list == NULL) {
                    goto fail_own;
                }
                int set = PyDict_SetItem(owners, h, list);
                Py_DECREF(list); /* the dict holds it */
                if (set < 0) {
                    goto fail_own;
                }
            }
            if (position == NULL) {
                position = PyLong_FromSsize_t(n);
                if (position == NULL) {
                    goto fail_own;
                }
            }
            if (PyList_Append(list, position) < 0) {
                goto fail_own;
            }
        }
        Py_XDECREF(position);
        Py_DECREF(own);
        continue;
    fail_own:
        Py_XDECREF(position);
        Py_DECREF(own);
        goto fail;
    }
    Py_DECREF(name);
    return owners;
fail:
    Py_DECREF(name);
    Py_DECREF(owners);
    return NULL;
}

static PyMethodDef kin_methods[] = {
    {"owners", kin_owners, METH_O, "owners(kin): {hash of an own kin key: [positions in kin]}"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kin_module = {
    PyModuleDef_HEAD_INIT, "_kin_c", "The compiled twin of proxy/_kin.py's index of a window's kin.", 0,
    kin_methods,
};

PyMODINIT_FUNC
PyInit__kin_c(void)
{
    return PyModuleDef_Init(&kin_module);
}
