/* The compiled twin of _markup.find_markup (contracts/_markup.py is the reference and the fallback;
 * tests/contracts/test_native_twins.py holds the two equal).
 *
 * find_markup(needles_by_id, fallback, pattern, text) -> (offset, excerpt) | None
 *
 * The markup rules ask it of every answer's content and reasoning, five to seven times a view,
 * and nearly always of a text that holds none of the pattern's needles (what each of its matches
 * starts with): then the answer is None without a search, and here without a Python frame. With
 * a needle in the text, the pattern's own search decides, as in the reference. ``needles_by_id``
 * is _markup._NEEDLES (each pattern's needles by its id); a text that is not a str or None, or
 * needles not a tuple of str, go to ``fallback`` (the reference) whole.
 *
 * No state is kept between calls but the method names, made once at load.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* names of the match methods called here, made once when the module is loaded (constants) */
static PyObject *search_name, *start_name, *end_name;

/* 1 where some needle is in text, 0 where none is, -1 with an error set; -2 (no error) where
 * ``needles`` is not a tuple of str. */
static int
holds_a_needle(PyObject *text, PyObject *needles)
{
    if (!PyTuple_CheckExact(needles))
        return -2;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(needles); i++) {
        PyObject *needle = PyTuple_GET_ITEM(needles, i);
        if (!PyUnicode_CheckExact(needle))
            return -2;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(needles); i++) {
        int found = PyUnicode_Contains(text, PyTuple_GET_ITEM(needles, i));
        if (found != 0)
            return found;
    }
    return 0;
}

/* An int method of the match, as a Py_ssize_t; -1 with an error set on failure. */
static Py_ssize_t
match_index(PyObject *match, PyObject *name)
{
    PyObject *value = PyObject_CallMethodNoArgs(match, name);
    if (value == NULL)
        return -1;
    Py_ssize_t out = PyLong_AsSsize_t(value);
    Py_DECREF(value);
    return out;
}

static PyObject *
find_markup(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "find_markup takes needles_by_id, fallback, pattern and text");
        return NULL;
    }
    PyObject *by_id = args[0], *fallback = args[1], *pattern = args[2], *text = args[3];
    if (text == Py_None)
        Py_RETURN_NONE;
    if (!PyUnicode_CheckExact(text) || !PyDict_CheckExact(by_id))
        return PyObject_CallFunctionObjArgs(fallback, pattern, text, NULL);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    if (len == 0)
        Py_RETURN_NONE;

    PyObject *key = PyLong_FromVoidPtr(pattern); /* id(pattern) */
    if (key == NULL)
        return NULL;
    PyObject *needles = PyDict_GetItemWithError(by_id, key); /* borrowed */
    Py_DECREF(key);
    if (needles == NULL && PyErr_Occurred())
        return NULL;
    if (needles != NULL && needles != Py_None) {
        Py_INCREF(needles); /* held while read, whatever becomes of the dict */
        int found = holds_a_needle(text, needles);
        Py_DECREF(needles);
        if (found == -2)
            return PyObject_CallFunctionObjArgs(fallback, pattern, text, NULL);
        if (found < 0)
            return NULL;
        if (found == 0)
            Py_RETURN_NONE;
    }

    PyObject *match = PyObject_CallMethodOneArg(pattern, search_name, text);
    if (match == NULL || match == Py_None)
        return match;
    Py_ssize_t start = match_index(match, start_name);
    Py_ssize_t end = start < 0 ? -1 : match_index(match, end_name);
    Py_DECREF(match);
    if (end < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_SystemError, "find_markup: a match without a span");
        return NULL;
    }
    /* text[max(0, start - 20) : end + 40], the slice clamped to the text as Python's is */
    Py_ssize_t lo = start > 20 ? start - 20 : 0;
    Py_ssize_t hi = end > PY_SSIZE_T_MAX - 40 ? PY_SSIZE_T_MAX : end + 40;
    PyObject *excerpt = PyUnicode_Substring(text, lo, hi);
    if (excerpt == NULL)
        return NULL;
    PyObject *offset = PyLong_FromSsize_t(start);
    PyObject *out = offset == NULL ? NULL : PyTuple_Pack(2, offset, excerpt);
    Py_XDECREF(offset);
    Py_DECREF(excerpt);
    return out;
}

static PyMethodDef methods[] = {
    {"find_markup", (PyCFunction)(void (*)(void))find_markup, METH_FASTCALL,
     "find_markup(needles_by_id, fallback, pattern, text) -> (offset, excerpt) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_markup_c",
    .m_doc = "The markup search's needle test (contracts/_markup.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__markup_c(void)
{
    if (search_name == NULL && (search_name = PyUnicode_InternFromString("search")) == NULL)
        return NULL;
    if (start_name == NULL && (start_name = PyUnicode_InternFromString("start")) == NULL)
        return NULL;
    if (end_name == NULL && (end_name = PyUnicode_InternFromString("end")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
