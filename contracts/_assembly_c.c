/* The compiled twin of assemble_stream's fold of template-alike text chunks (contracts/_assembly.py
 * is the reference and the fallback; tests/contracts/test_native_twins.py holds the two equal).
 *
 * fold_text(events, start, before, after, least, most, cls) -> (end, text, tokens, times) | None
 *
 * From events[start] on, each event whose data is ``before`` + one JSON string + ``after``, of
 * ``least`` to ``most`` characters, is the stream's plain text chunk with that string for text
 * (_assembly._Template). The run of such events is folded at once: ``end`` is the first event not
 * folded, ``text`` their strings joined, ``tokens`` how many were not empty and ``times`` the
 * arrival offsets (t_ms) of those that were not empty and have one. None where events[start] is not
 * one of them (or the arguments are of another type): the caller then reads that event itself.
 * Each event must be an instance of ``cls`` (SSEEvent, a slots dataclass): its data and t_ms are
 * read from their slots, and a run ends at an event of another class.
 *
 * Only a string this reads exactly as orjson does is folded: characters from U+0020 on and the escapes
 * of JSON (a \u escape of a surrogate only as a pair). Anything else (a control character, a lone
 * surrogate, whitespace around the string, a bad escape) ends the run, and the reference reads that
 * event as it always did: orjson decides it.
 *
 * Never crashes on input: every index is checked before a read, every API return is checked, and
 * buffers are sized from the string they hold. No state is kept between calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

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

/* Reads the JSON string that is exactly text[lo:hi] (its quotes included) as orjson does: 0, with
 * its length and largest character added to *len and *maxchar; -1 where it is not one this reads
 * (the caller hands it back). With ``out``, its characters are also written there from *at on. */
static int
json_string(int kind, const void *text, Py_ssize_t lo, Py_ssize_t hi, int out_kind, void *out, Py_ssize_t *at,
            Py_ssize_t *len, Py_UCS4 *maxchar)
{
    if (hi - lo < 2 || PyUnicode_READ(kind, text, lo) != '"' || PyUnicode_READ(kind, text, hi - 1) != '"')
        return -1;
    Py_ssize_t stop = hi - 1, n = 0;
    Py_UCS4 most = 0;
    for (Py_ssize_t i = lo + 1; i < stop; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, text, i);
        /* orjson refuses these unescaped (a quote would end the string early) */
        if (c < 0x20 || c == '"' || (c >= 0xD800 && c <= 0xDFFF))
            return -1;
        if (c == '\\') {
            if (++i >= stop)
                return -1;
            switch (PyUnicode_READ(kind, text, i)) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                long v = hex4(kind, text, i + 1, stop);
                if (v < 0 || (v >= 0xDC00 && v <= 0xDFFF))
                    return -1;
                i += 4;
                if (v >= 0xD800 && v <= 0xDBFF) { /* only as the first of a pair */
                    if (i + 2 >= stop || PyUnicode_READ(kind, text, i + 1) != '\\' ||
                        PyUnicode_READ(kind, text, i + 2) != 'u')
                        return -1;
                    long low = hex4(kind, text, i + 3, stop);
                    if (low < 0xDC00 || low > 0xDFFF)
                        return -1;
                    v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
                    i += 6;
                }
                c = (Py_UCS4)v;
                break;
            }
            default:
                return -1;
            }
        }
        if (out != NULL)
            PyUnicode_WRITE(out_kind, out, *at + n, c);
        n++;
        if (c > most)
            most = c;
    }
    if (out != NULL)
        *at += n;
    *len += n;
    if (most > *maxchar)
        *maxchar = most;
    return 0;
}

/* The data of an event of the run, borrowed, or NULL where it is not one (not an instance of the
 * event class, its data or time unset, its data not a str): the run ends there, and the reference
 * reads that event (and raises where it must). */
static PyObject *
event_data(PyObject *ev, PyTypeObject *cls, Py_ssize_t data_at, Py_ssize_t t_at)
{
    if (!Py_IS_TYPE(ev, cls) || *(PyObject **)((char *)ev + t_at) == NULL)
        return NULL;
    PyObject *data = *(PyObject **)((char *)ev + data_at);
    return data != NULL && PyUnicode_CheckExact(data) ? data : NULL;
}

/* The offset of the writable object slot ``name`` of ``cls`` itself, or -1. */
static Py_ssize_t
slot_offset(PyTypeObject *cls, PyObject *name)
{
    PyObject *descr = PyObject_GetAttr((PyObject *)cls, name);
    if (descr == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDescrObject *m = (PyMemberDescrObject *)descr;
        PyMemberDef *def = m->d_member;
        if (m->d_common.d_type == cls && def->type == Py_T_OBJECT_EX && !(def->flags & Py_READONLY) &&
            def->offset >= (Py_ssize_t)sizeof(PyObject) &&
            def->offset + (Py_ssize_t)sizeof(PyObject *) <= cls->tp_basicsize)
            offset = def->offset;
    }
    Py_DECREF(descr);
    return offset;
}

static PyObject *
fold_text(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "fold_text takes events, start, before, after, least, most, cls");
        return NULL;
    }
    PyObject *events = args[0], *before = args[2], *after = args[3];
    if (!PyList_CheckExact(events) || !PyLong_CheckExact(args[1]) || !PyUnicode_CheckExact(before) ||
        !PyUnicode_CheckExact(after) || !PyLong_CheckExact(args[4]) || !PyLong_CheckExact(args[5]) ||
        !PyType_Check(args[6]))
        Py_RETURN_NONE;
    PyTypeObject *cls = (PyTypeObject *)args[6];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t least = PyLong_AsSsize_t(args[4]);
    Py_ssize_t most = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t cut = PyUnicode_GET_LENGTH(before), tail = PyUnicode_GET_LENGTH(after);
    Py_ssize_t data_at = slot_offset(cls, data_name), t_at = slot_offset(cls, t_name);
    if (start < 0 || tail == 0 || data_at < 0 || t_at < 0)
        Py_RETURN_NONE;

    Py_ssize_t size = PyList_GET_SIZE(events);
    if (start >= size)
        Py_RETURN_NONE;
    /* each event of the run's data and time, held: the second pass allocates, a collection may
     * run a finalizer then, and that could change the list or an event */
    PyObject **held = PyMem_New(PyObject *, (size_t)(2 * (size - start)));
    if (held == NULL)
        return PyErr_NoMemory();

    /* First pass: how far the run goes, and its text's length and largest character. It
     * allocates nothing, so no Python code runs while it reads the list. */
    Py_ssize_t end = start, len = 0, tokens = 0;
    Py_UCS4 maxchar = 0;
    for (; end < size; end++) {
        PyObject *ev = PyList_GET_ITEM(events, end);
        PyObject *data = event_data(ev, cls, data_at, t_at);
        Py_ssize_t n = data == NULL ? -1 : PyUnicode_GET_LENGTH(data), was = len;
        if (n < least || n > most || n < cut + tail || PyUnicode_Tailmatch(data, before, 0, n, -1) != 1 ||
            PyUnicode_Tailmatch(data, after, 0, n, 1) != 1 ||
            json_string(PyUnicode_KIND(data), PyUnicode_DATA(data), cut, n - tail, 0, NULL, NULL, &len, &maxchar) < 0)
            break;
        if (len > was)
            tokens++;
        held[2 * (end - start)] = Py_NewRef(data);
        held[2 * (end - start) + 1] = Py_NewRef(*(PyObject **)((char *)ev + t_at));
    }
    Py_ssize_t count = end - start;
    PyObject *result = NULL, *text = NULL, *times = NULL;
    if (PyErr_Occurred()) /* Tailmatch's own failure (never on two str) */
        goto done;
    if (count == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }

    /* Second pass: the text written once, and the times of the events that carried some */
    text = PyUnicode_New(len, maxchar);
    times = PyList_New(0);
    if (text == NULL || times == NULL)
        goto done;
    int out_kind = PyUnicode_KIND(text);
    void *out = PyUnicode_DATA(text);
    Py_ssize_t at = 0, unused_len = 0;
    Py_UCS4 unused_max = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *data = held[2 * k], *t = held[2 * k + 1];
        Py_ssize_t was = at;
        /* the same str as in the first pass (held, immutable): it reads the same */
        json_string(PyUnicode_KIND(data), PyUnicode_DATA(data), cut, PyUnicode_GET_LENGTH(data) - tail, out_kind,
                    out, &at, &unused_len, &unused_max);
        if (at > was && t != Py_None && PyList_Append(times, t) < 0)
            goto done;
    }
    PyObject *head = PyLong_FromSsize_t(end), *tally = PyLong_FromSsize_t(tokens);
    if (head != NULL && tally != NULL)
        result = PyTuple_Pack(4, head, text, tally, times);
    Py_XDECREF(head);
    Py_XDECREF(tally);
done:
    for (Py_ssize_t k = 0; k < 2 * count; k++)
        Py_DECREF(held[k]);
    PyMem_Free(held);
    Py_XDECREF(text);
    Py_XDECREF(times);
    return result;
}

static PyMethodDef methods[] = {
    {"fold_text", (PyCFunction)(void (*)(void))fold_text, METH_FASTCALL,
     "fold_text(events, start, before, after, least, most, cls) -> (end, text, tokens, times) | None"},
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
