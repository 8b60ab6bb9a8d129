/* The compiled twin of _sse.decode_joined's cut of the plain SSE framing (contracts/_sse.py is the
 * reference and the fallback; tests/contracts/test_native_twins.py holds the two equal).
 *
 * cut_plain(raw, sizes, times, cls) -> (events, has_digit_run) | None
 *
 * A stream in the plain framing (``data: X`` lines each followed by a blank line, LF only, UTF-8)
 * is cut into its events in one pass over its bytes, which also asks whether it holds a run of 19
 * ASCII digits (_json.plain_number_bytes). Each event is an instance of ``cls`` (SSEEvent, a slots
 * dataclass) made without its __init__, its slots written in place as _sse._event sets them: in
 * Python, making them cost as much as the cut. None for anything else (another framing, invalid
 * UTF-8, sizes that do not add up to the stream, arguments of another type): the caller then runs
 * the reference, which decides every such case itself.
 *
 * Never crashes on input: every length is checked before a read, every API return is checked, and
 * no buffer of a fixed size is written. No state is kept between calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* the fields of an event, in the order cut_plain writes them (SSEEvent's slots) */
enum { F_DATA, F_EVENT, F_ID, F_RETRY, F_INDEX, F_T_MS, F_LINES, N_FIELDS };
static const char *const FIELD_NAMES[N_FIELDS] = {"data", "event", "id", "retry", "index", "t_ms", "lines"};
/* the same names as str, made once when the module is loaded (constants: never changed after) */
static PyObject *field_names[N_FIELDS];

/* the 19 digits in a row that orjson may read otherwise than json (_json._LONG_RUN) */
#define LONG_RUN 19

/* Whether s[0:len] holds a run of LONG_RUN ASCII digits. Any such run covers one of the bytes
 * LONG_RUN - 1, 2 * LONG_RUN - 1, ...: only those are looked at, and the run around one that is a
 * digit measured (a nineteenth of the bytes, where a stream is mostly text). */
static int
has_long_run(const char *s, Py_ssize_t len)
{
    for (Py_ssize_t j = LONG_RUN - 1; j < len; j += LONG_RUN) {
        if (s[j] < '0' || s[j] > '9')
            continue;
        Py_ssize_t lo = j, hi = j;
        while (lo > 0 && s[lo - 1] >= '0' && s[lo - 1] <= '9')
            lo--;
        while (hi + 1 < len && s[hi + 1] >= '0' && s[hi + 1] <= '9')
            hi++;
        if (hi - lo + 1 >= LONG_RUN)
            return 1;
        j = hi; /* the next run starts past hi + 1: the stride still meets one of LONG_RUN */
    }
    return 0;
}

/* Whether s[0:len] is all ASCII: then each event's text is its bytes as they are, copied into a
 * str without the UTF-8 decoder's own pass over them. */
static int
is_ascii(const char *s, Py_ssize_t len)
{
    /* eight bytes at a time: their high bits or'ed together */
    uint64_t high = 0, word;
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&word, s + i, 8);
        high |= word;
    }
    for (; i < len; i++)
        high |= (unsigned char)s[i];
    return (high & UINT64_C(0x8080808080808080)) == 0;
}

/* Where each field of ``cls`` lies in its instances: the offsets of its own slots, which must be
 * writable object slots of cls itself inside its instances. 0 on success; -1 (no error set) where
 * cls is not such a class, so the caller falls back. */
static int
slot_offsets(PyTypeObject *cls, Py_ssize_t offsets[N_FIELDS])
{
    for (int f = 0; f < N_FIELDS; f++) {
        PyObject *descr = PyObject_GetAttr((PyObject *)cls, field_names[f]);
        if (descr == NULL) {
            PyErr_Clear();
            return -1;
        }
        int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type);
        if (ok) {
            PyMemberDescrObject *m = (PyMemberDescrObject *)descr;
            PyMemberDef *def = m->d_member;
            ok = m->d_common.d_type == cls && def->type == Py_T_OBJECT_EX && !(def->flags & Py_READONLY) &&
                 def->offset >= (Py_ssize_t)sizeof(PyObject) &&
                 def->offset + (Py_ssize_t)sizeof(PyObject *) <= cls->tp_basicsize;
            offsets[f] = def->offset;
        }
        Py_DECREF(descr);
        if (!ok)
            return -1;
    }
    return 0;
}

/* One event: ``data`` and ``t_ms`` taken (new references, consumed either way), the rest as
 * _sse._event sets them. NULL with an error set on failure. */
static PyObject *
make_event(PyTypeObject *cls, const Py_ssize_t offsets[N_FIELDS], PyObject *data, Py_ssize_t index,
           PyObject *t_ms, PyObject *name, long lines)
{
    /* ``name``: a new reference (consumed either way), or NULL for an event without one (None) */
    if (name == NULL)
        name = Py_NewRef(Py_None);
    PyObject *idx = PyLong_FromSsize_t(index);
    if (idx == NULL) {
        Py_DECREF(data);
        Py_DECREF(t_ms);
        Py_DECREF(name);
        return NULL;
    }
    PyObject *ev = cls->tp_alloc(cls, 0);
    if (ev == NULL) {
        Py_DECREF(data);
        Py_DECREF(t_ms);
        Py_DECREF(name);
        Py_DECREF(idx);
        return NULL;
    }
    /* tp_alloc zeroed the slots, so a collection before they are all written sees NULLs, which a
     * slot's traverse skips */
    PyObject *values[N_FIELDS] = {data, name, Py_NewRef(Py_None), Py_NewRef(Py_None), idx,
                                  t_ms, PyLong_FromLong(lines)};
    for (int f = 0; f < N_FIELDS; f++)
        *(PyObject **)((char *)ev + offsets[f]) = values[f];
    /* PyLong_FromLong of 1 or 2 is a cached small int and cannot fail. With an arrival offset that is a
     * float, an int or None, every field holds a value that refers to nothing: the event can be in
     * no reference cycle, so the cyclic GC is told not to walk it (as CPython does for a tuple of
     * such values). A recorded stream's events were over half the objects the live checker's
     * collections walked. The fields are written nowhere else, and an offset of any other type
     * (a caller's own list of times) leaves the event tracked; an instance of a class without the GC
     * has no GC header to clear. */
    if (PyType_IS_GC(cls) && (t_ms == Py_None || PyFloat_CheckExact(t_ms) || PyLong_CheckExact(t_ms)))
        PyObject_GC_UnTrack(ev);
    return ev;
}

/* A text of the stream as a str: its bytes copied where the stream is ASCII, else decoded (NULL
 * with UnicodeDecodeError for bytes that are not UTF-8) */
static PyObject *
text_of(const char *s, Py_ssize_t len, int ascii)
{
    if (!ascii)
        return PyUnicode_DecodeUTF8(s, len, "strict");
    PyObject *text = PyUnicode_New(len, 127);
    if (text != NULL)
        memcpy(PyUnicode_DATA(text), s, (size_t)len);
    return text;
}

/* The arguments both cuts take: (raw, sizes, times, cls). 1 with the fields set; 0 where the
 * reference decides (arguments of another type, a class whose slots are not SSEEvent's); -1 with
 * an error set (a wrong count of arguments). */
typedef struct {
    const char *raw;
    Py_ssize_t len;
    PyObject *sizes, *times;
    PyTypeObject *cls;
    Py_ssize_t offsets[N_FIELDS];
} CutArgs;

static int
cut_args(PyObject *const *args, Py_ssize_t nargs, const char *name, CutArgs *a)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "%s takes raw, sizes, times and the event class", name);
        return -1;
    }
    if (!PyBytes_CheckExact(args[0]) || !PyList_CheckExact(args[1]) || !PyList_CheckExact(args[2]) ||
        !PyType_Check(args[3]))
        return 0;
    a->cls = (PyTypeObject *)args[3];
    if (a->cls->tp_alloc == NULL || slot_offsets(a->cls, a->offsets) < 0)
        return 0;
    a->raw = PyBytes_AS_STRING(args[0]);
    a->len = PyBytes_GET_SIZE(args[0]);
    a->sizes = args[1];
    a->times = args[2];
    /* sizes for the pieces, and an arrival for each */
    if (PyList_GET_SIZE(a->sizes) == 0 || PyList_GET_SIZE(a->times) < PyList_GET_SIZE(a->sizes))
        return 0;
    return 1;
}

/* The arrival of the piece holding byte ``pos - 1`` (the end of an event's blank line: the piece
 * whose arrival dispatched it), the pieces walked on from ``*piece`` whose bytes end at ``*end``
 * (-1 before the first): a new reference, or NULL (no error set) where the sizes are not ints that
 * cover the stream, the reference's case. The lists' lengths are asked again at each read: an
 * allocation between two calls may collect garbage, and a finalizer run then could change them. */
static PyObject *
arrival(const CutArgs *a, Py_ssize_t pos, Py_ssize_t *piece, Py_ssize_t *end)
{
    while (*end < pos) {
        if (*end >= 0)
            (*piece)++;
        if (*piece >= PyList_GET_SIZE(a->sizes))
            return NULL;
        PyObject *item = PyList_GET_ITEM(a->sizes, *piece);
        Py_ssize_t size = PyLong_CheckExact(item) ? PyLong_AsSsize_t(item) : -1;
        if (size < 0) {
            PyErr_Clear();
            return NULL;
        }
        *end = (*end < 0 ? 0 : *end) + size;
    }
    if (*piece >= PyList_GET_SIZE(a->times))
        return NULL;
    return Py_NewRef(PyList_GET_ITEM(a->times, *piece));
}

static PyObject *
cut_plain(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    CutArgs a;
    int took = cut_args(args, nargs, "cut_plain", &a);
    if (took <= 0)
        return took < 0 ? NULL : Py_NewRef(Py_None);
    const char *raw = a.raw;
    Py_ssize_t len = a.len;
    /* starts with "data: " and ends with a blank line (the two cannot overlap) */
    if (len < 8 || memcmp(raw, "data: ", 6) != 0 || raw[len - 2] != '\n' || raw[len - 1] != '\n')
        Py_RETURN_NONE;

    /* The frame: no CR anywhere, and every LF before the closing blank line starts a
     * "\n\ndata: " (LF, LF, then the next event's field): exactly the streams the reference cuts at
     * once. memchr, not a loop over bytes: a stream is mostly its events' text. */
    if (memchr(raw, '\r', (size_t)len) != NULL)
        Py_RETURN_NONE;
    Py_ssize_t n = 1;
    const char *p = raw, *last = raw + len - 2;
    while (p < last && (p = memchr(p, '\n', (size_t)(last - p))) != NULL) {
        if (raw + len - p < 8 || memcmp(p, "\n\ndata: ", 8) != 0)
            Py_RETURN_NONE;
        n++;
        p += 8;
    }

    /* Each event's bytes with its "data: " and blank line, against the pieces it arrived in: where
     * its blank line ends is the piece whose arrival dispatched it. */
    int ascii = is_ascii(raw, len);
    PyObject *events = PyList_New(n);
    if (events == NULL)
        return NULL;
    Py_ssize_t start = 6; /* the current event's text */
    Py_ssize_t piece = 0, end = -1, pos = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        const char *nl = memchr(raw + start, '\n', (size_t)(len - start));
        Py_ssize_t stop = nl == NULL ? len : nl - raw; /* never NULL: the stream ends in LF */
        pos += stop - start + 8;
        PyObject *t_ms = arrival(&a, pos, &piece, &end); /* held across the allocations */
        if (t_ms == NULL)
            goto fallback;
        PyObject *data = text_of(raw + start, stop - start, ascii);
        if (data == NULL) {
            Py_DECREF(t_ms);
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                goto error;
            PyErr_Clear();
            goto fallback;
        }
        PyObject *ev = make_event(a.cls, a.offsets, data, k, t_ms, NULL, 1);
        if (ev == NULL)
            goto error;
        PyList_SET_ITEM(events, k, ev);
        start = stop + 8;
    }
    PyObject *out = PyTuple_New(2);
    if (out == NULL)
        goto error;
    PyTuple_SET_ITEM(out, 0, events);
    PyTuple_SET_ITEM(out, 1, Py_NewRef(has_long_run(raw, len) ? Py_True : Py_False));
    return out;

fallback:
    Py_DECREF(events);
    Py_RETURN_NONE;
error:
    Py_DECREF(events);
    return NULL;
}

/* cut_named(raw, sizes, times, cls) -> (events, has_digit_run, data_chars) | None
 *
 * _sse._cut_named's cut of the named framing of /v1/responses and /v1/messages streams: every event
 * an ``event: NAME`` line, a ``data: X`` line and a blank line, LF only, UTF-8. Each event is made as
 * the fed decoder makes it (its name, its data, 2 lines); has_digit_run says whether an event's data
 * holds a run of 19 ASCII digits, data_chars how many characters the data hold in all (what
 * _json.plain_numbers asks of them). A name seen for the event before is the same str again. None
 * for anything else, which the reference decides. */
static PyObject *
cut_named(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    CutArgs a;
    int took = cut_args(args, nargs, "cut_named", &a);
    if (took <= 0)
        return took < 0 ? NULL : Py_NewRef(Py_None);
    const char *raw = a.raw;
    Py_ssize_t len = a.len;
    if (len < 16 || memcmp(raw, "event: ", 7) != 0 || raw[len - 2] != '\n' || raw[len - 1] != '\n' ||
        memchr(raw, '\r', (size_t)len) != NULL)
        Py_RETURN_NONE;

    /* The frame, checked whole before anything is made: at each event's start "event: ", its
     * name to the first LF, then "data: ", its text to the next LF, then the blank line's LF. */
    Py_ssize_t n = 0;
    for (Py_ssize_t at = 0; at < len; n++) {
        if (len - at < 7 || memcmp(raw + at, "event: ", 7) != 0)
            Py_RETURN_NONE;
        const char *nl = memchr(raw + at + 7, '\n', (size_t)(len - at - 7));
        if (nl == NULL || raw + len - nl < 8 || memcmp(nl + 1, "data: ", 6) != 0)
            Py_RETURN_NONE;
        const char *end = memchr(nl + 7, '\n', (size_t)(raw + len - nl - 7));
        if (end == NULL || end + 1 >= raw + len || end[1] != '\n')
            Py_RETURN_NONE;
        at = end + 2 - raw;
    }
    int ascii = is_ascii(raw, len), digits = 0;
    Py_ssize_t chars = 0;
    PyObject *events = PyList_New(n);
    if (events == NULL)
        return NULL;
    PyObject *last_name = NULL; /* the last event's name, and its bytes */
    const char *last_at = NULL;
    Py_ssize_t last_len = -1;
    Py_ssize_t at = 0, piece = 0, end_of_piece = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        const char *name = raw + at + 7;
        const char *nl = memchr(name, '\n', (size_t)(len - at - 7));
        const char *text = nl + 7;
        const char *stop = memchr(text, '\n', (size_t)(raw + len - text));
        Py_ssize_t name_len = nl - name, text_len = stop - text;
        at = stop + 2 - raw; /* past the blank line: the byte that dispatches the event is at - 1 */
        PyObject *t_ms = arrival(&a, at, &piece, &end_of_piece); /* held across the allocations */
        if (t_ms == NULL)
            goto fallback;
        if (last_name == NULL || name_len != last_len || memcmp(name, last_at, (size_t)name_len) != 0) {
            PyObject *made = text_of(name, name_len, ascii);
            if (made == NULL) {
                Py_DECREF(t_ms);
                goto decode_failed;
            }
            Py_XSETREF(last_name, made);
            last_at = name;
            last_len = name_len;
        }
        PyObject *data = text_of(text, text_len, ascii);
        if (data == NULL) {
            Py_DECREF(t_ms);
            goto decode_failed;
        }
        chars += PyUnicode_GET_LENGTH(data);
        if (!digits && has_long_run(text, text_len))
            digits = 1;
        PyObject *ev = make_event(a.cls, a.offsets, data, k, t_ms, Py_NewRef(last_name), 2);
        if (ev == NULL)
            goto error;
        PyList_SET_ITEM(events, k, ev);
    }
    Py_XDECREF(last_name);
    return Py_BuildValue("(NOn)", events, digits ? Py_True : Py_False, chars);

decode_failed:
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        goto error;
    PyErr_Clear();
fallback:
    Py_XDECREF(last_name);
    Py_DECREF(events);
    Py_RETURN_NONE;
error:
    Py_XDECREF(last_name);
    Py_DECREF(events);
    return NULL;
}

static PyMethodDef methods[] = {
    {"cut_plain", (PyCFunction)(void (*)(void))cut_plain, METH_FASTCALL,
     "cut_plain(raw, sizes, times, cls) -> (events, has_digit_run) | None"},
    {"cut_named", (PyCFunction)(void (*)(void))cut_named, METH_FASTCALL,
     "cut_named(raw, sizes, times, cls) -> (events, has_digit_run, data_chars) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_sse_c",
    .m_doc = "The plain and the named SSE framings cut at once (contracts/_sse.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__sse_c(void)
{
    for (int f = 0; f < N_FIELDS; f++) {
        if (field_names[f] == NULL && (field_names[f] = PyUnicode_InternFromString(FIELD_NAMES[f])) == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
