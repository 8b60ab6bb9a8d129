/* The compiled twin of assemble_stream's fold of template-alike text chunks (contracts/_assembly.py
 * is the reference and the fallback; tests/contracts/test_assembly_c.py holds the two equal).
 *
 * fold_text(events, start, before, after, least, most) -> (end, text, tokens, times) | None
 *
 * From events[start] on, each event whose data is ``before`` + one JSON string + ``after``, of
 * ``least`` to ``most`` characters, is the stream's plain text chunk with that string for text
 * (_assembly._Template). The run of such events is folded at once: ``end`` is the first event not
 * folded, ``text`` their strings joined, ``tokens`` how many were not empty and ``times`` the
 * arrival offsets (t_ms) of those that were not empty and have one. None where events[start] is not
 * one of them (or the arguments are of another type): the caller then reads that event itself.
 *
 * Only a string this reads exactly as orjson does is folded: printable characters and the escapes
 * of JSON (a \u escape of a surrogate only as a pair). Anything else (a control character, a lone
 * surrogate, whitespace around the string, a bad escape) ends the run, and the reference reads that
 * event as it always did: orjson decides it.
 *
 * Never crashes on input: every index is checked before a read, every API return is checked, and
 * buffers are sized from the string they hold. No state is kept between calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* the event's attributes read here, made once when the module is loaded (constants) */
static PyObject *data_name, *t_name;

static int
hex_value(Py_UCS4 c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

/* The four hex digits of a \u escape at data[at..at+4), or -1. */
static long
hex4(int kind, const void *data, Py_ssize_t at, Py_ssize_t stop)
{
    if (stop - at < 4)
        return -1;
    long v = 0;
    for (Py_ssize_t i = at; i < at + 4; i++) {
        int h = hex_value(PyUnicode_READ(kind, data, i));
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* The JSON string that is exactly s[lo:hi] (its quotes included), as a new str; NULL with no error
 * set where it is not one this reads as orjson does; NULL with an error set on failure. */
static PyObject *
json_string(PyObject *s, Py_ssize_t lo, Py_ssize_t hi)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (hi - lo < 2 || PyUnicode_READ(kind, data, lo) != '"' || PyUnicode_READ(kind, data, hi - 1) != '"')
        return NULL;
    Py_ssize_t first = lo + 1, stop = hi - 1;
    int escaped = 0;
    for (Py_ssize_t i = first; i < stop; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x20 || c == '"' || (c >= 0xD800 && c <= 0xDFFF))
            return NULL; /* orjson refuses these unescaped (a quote ends the string early) */
        if (c == '\\') {
            escaped = 1;
            break;
        }
    }
    if (!escaped)
        return PyUnicode_Substring(s, first, stop);
    /* with escapes: decoded into a buffer no longer than the text */
    Py_UCS4 *buf = PyMem_New(Py_UCS4, (size_t)(stop - first));
    if (buf == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t n = 0;
    for (Py_ssize_t i = first; i < stop; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x20 || c == '"' || (c >= 0xD800 && c <= 0xDFFF))
            goto refuse;
        if (c != '\\') {
            buf[n++] = c;
            continue;
        }
        if (++i >= stop)
            goto refuse;
        switch (PyUnicode_READ(kind, data, i)) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            long v = hex4(kind, data, i + 1, stop);
            if (v < 0 || (v >= 0xDC00 && v <= 0xDFFF))
                goto refuse;
            i += 4;
            if (v >= 0xD800 && v <= 0xDBFF) { /* only as the first of a pair */
                if (i + 2 >= stop || PyUnicode_READ(kind, data, i + 1) != '\\' ||
                    PyUnicode_READ(kind, data, i + 2) != 'u')
                    goto refuse;
                long low = hex4(kind, data, i + 3, stop);
                if (low < 0xDC00 || low > 0xDFFF)
                    goto refuse;
                v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
            }
            buf[n++] = (Py_UCS4)v;
            break;
        }
        default:
            goto refuse;
        }
    }
    PyObject *out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, n);
    PyMem_Free(buf);
    return out;
refuse:
    PyMem_Free(buf);
    return NULL;
}

static PyObject *
fold_text(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "fold_text takes events, start, before, after, least, most");
        return NULL;
    }
    PyObject *events = args[0], *before = args[2], *after = args[3];
    if (!PyList_CheckExact(events) || !PyLong_CheckExact(args[1]) || !PyUnicode_CheckExact(before) ||
        !PyUnicode_CheckExact(after) || !PyLong_CheckExact(args[4]) || !PyLong_CheckExact(args[5]))
        Py_RETURN_NONE;
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t least = PyLong_AsSsize_t(args[4]);
    Py_ssize_t most = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t cut = PyUnicode_GET_LENGTH(before), tail = PyUnicode_GET_LENGTH(after);
    if (start < 0 || tail == 0)
        Py_RETURN_NONE;

    PyObject *pieces = PyList_New(0);
    PyObject *times = PyList_New(0);
    PyObject *out = NULL;
    if (pieces == NULL || times == NULL)
        goto done;
    Py_ssize_t end = start, tokens = 0;
    /* the list is read afresh at each step: nothing here runs Python code that could change it,
     * but its length is never assumed */
    while (end < PyList_GET_SIZE(events)) {
        PyObject *ev = PyList_GET_ITEM(events, end);
        PyObject *data = PyObject_GetAttr(ev, data_name);
        if (data == NULL) {
            PyErr_Clear();
            break;
        }
        Py_ssize_t len = PyUnicode_CheckExact(data) ? PyUnicode_GET_LENGTH(data) : -1;
        PyObject *text = NULL;
        if (len >= least && len <= most && len >= cut + tail &&
            PyUnicode_Tailmatch(data, before, 0, len, -1) == 1 &&
            PyUnicode_Tailmatch(data, after, 0, len, 1) == 1)
            text = json_string(data, cut, len - tail);
        Py_DECREF(data);
        if (text == NULL) {
            if (PyErr_Occurred())
                goto done;
            break; /* not one of the run: the reference reads it */
        }
        int appended = PyList_Append(pieces, text);
        Py_ssize_t size = PyUnicode_GET_LENGTH(text);
        Py_DECREF(text);
        if (appended < 0)
            goto done;
        if (size > 0) {
            tokens++;
            PyObject *t = PyObject_GetAttr(ev, t_name);
            if (t == NULL)
                goto done;
            int bad = t != Py_None && PyList_Append(times, t) < 0;
            Py_DECREF(t);
            if (bad)
                goto done;
        }
        end++;
    }
    if (end == start) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *empty = PyUnicode_New(0, 0);
    PyObject *text = empty == NULL ? NULL : PyUnicode_Join(empty, pieces);
    Py_XDECREF(empty);
    if (text == NULL)
        goto done;
    PyObject *at = PyLong_FromSsize_t(end), *count = PyLong_FromSsize_t(tokens);
    out = at == NULL || count == NULL ? NULL : PyTuple_Pack(4, at, text, count, times);
    Py_XDECREF(at);
    Py_XDECREF(count);
    Py_DECREF(text);
done:
    Py_XDECREF(pieces);
    Py_XDECREF(times);
    return out;
}

static PyMethodDef methods[] = {
    {"fold_text", (PyCFunction)(void (*)(void))fold_text, METH_FASTCALL,
     "fold_text(events, start, before, after, least, most) -> (end, text, tokens, times) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_assembly_c",
    .m_doc = "A run of template-alike text chunks folded at once (contracts/_assembly.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__assembly_c(void)
{
    if (data_name == NULL && (data_name = PyUnicode_InternFromString("data")) == NULL)
        return NULL;
    if (t_name == NULL && (t_name = PyUnicode_InternFromString("t_ms")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
