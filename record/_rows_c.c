/* The compiled twin of record/_rows.py's chunk columns: a streamed response's chunks as the row
 * keeps them (each one's arrival offset in whole microseconds, each one's size, their bytes joined),
 * in one pass over the list with no Python object made but the results.
 *
 * On the store writer's thread, which shares the forwarding loop's GIL, the Python way made a float
 * and an integer per chunk in a comprehension, packed and unpacked them through struct, and joined
 * the bytes: about a third of the row's document. The rounding is the one _whole_us reads out of
 * the bytes of float sums (its docstring says why it is the decimal way's wherever it answers): a
 * chunk off that path (an offset within 2**-16 of a half microsecond, past 71 minutes, before the
 * start, NaN, an infinity) or of another shape (an offset that is not a float, data that is not
 * bytes) makes the whole call answer None, and the Python reference does the response. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

/* Whole microseconds of one offset by the sum's bits, or -1 where the Python reference must
 * decide (the two are one function of t_ms wherever this answers: tests/record/test_rows_c.py). */
static long long whole_us(double t_ms) {
    double sum = t_ms * 1000.0 + GRID; /* two roundings, as Python's two operations make them */
    uint64_t bits;
    memcpy(&bits, &sum, sizeof bits);
    if ((bits >> 48) != 0x4238) /* not in [2**36, 2**37), or negative, NaN, infinite */
        return -1;
    unsigned frac = (unsigned)(bits & 0xffff);
    if (frac == 0 || frac == 0xffff) /* within 2**-16 of a whole number: the decimal way decides */
        return -1;
    return (long long)((bits >> 16) & 0xffffffffu);
}

/* chunk_columns(chunks: list) -> (t_us: list[int], sizes: list[int], body: bytes) | None */
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
        long long us = PyFloat_CheckExact(t) ? whole_us(PyFloat_AS_DOUBLE(t)) : -1;
        Py_DECREF(t);
        if (us < 0 || !PyBytes_CheckExact(data))
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

static PyMethodDef methods[] = {
    {"chunk_columns", chunk_columns, METH_O,
     "A response's chunks as a row keeps them: (whole microseconds, sizes, bytes joined), or None "
     "where the Python reference decides (record/_rows.py)."},
    {"joined", (PyCFunction)(void (*)(void))rows_joined, METH_FASTCALL,
     "joined(times, sizes, data): (data, sizes, times / 1000.0) where they are plainly right, else None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rows_c", "The compiled twin of record/_rows.py's chunk columns.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__rows_c(void) {
    name_t_ms = PyUnicode_InternFromString("t_ms");
    name_data = PyUnicode_InternFromString("data");
    if (name_t_ms == NULL || name_data == NULL)
        return NULL;
    PyObject *contracts = PyImport_ImportModule("wirecheck.contracts");
    if (contracts == NULL)
        return NULL;
    PyObject *chunk = PyObject_GetAttrString(contracts, "Chunk");
    Py_DECREF(contracts);
    if (chunk == NULL)
        return NULL;
    if (PyType_Check(chunk)) {
        chunk_type = (PyTypeObject *)chunk; /* kept for the module's life */
        t_ms_offset = slot_offset(chunk, "t_ms");
        data_offset = slot_offset(chunk, "data");
    } else {
        Py_DECREF(chunk);
    }
    return PyModule_Create(&module);
}
