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
 * assemble_plain(events, cls, stream_cls, choice_cls, loads, bounded, short, most, probe, probed)
 *     -> AssembledStream | None
 *
 * The whole of assemble_stream for a stream of plain chunks (every frame an object of choices whose
 * deltas hold only the role, the content and the reasoning, one id and one model, then [DONE]):
 * the stream it assembles, equal to the reference's, or None for any stream with something else in
 * it (an anomaly, an error frame, a tool call, a key of a delta's own), which the reference then
 * reads from its start. Each frame is read by ``loads`` (``bounded`` past ``short`` characters),
 * or, once a text chunk of its choice and field was seen, through that chunk's template (its text
 * around the one string, checked as _assembly._template checks it with ``probe``).
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


/* --- the whole of a plain stream ---------------------------------------------------------------- */

/* the names read of a chunk and set on the stream and its choices (constants, made at load) */
static PyObject *s_id, *s_model, *s_fingerprint, *s_usage, *s_choices, *s_index, *s_delta, *s_finish,
    *s_stop, *s_role, *s_content, *s_reasoning, *s_reasoning_content, *s_events, *s_frames,
    *s_usage_chunks, *s_usage_only, *s_done, *s_done_event, *s_ids, *s_first_event, *s_first_token,
    *s_last_token, *s_token_events, *s_token_times, *s_reasoning_fields, *s_finish_event,
    *s_stop_reason, *s_at_end, *s_done_text, *s_empty;

#define MAX_CHOICES 8
#define MAX_TEMPLATES 8
#define BAIL 1 /* not a plain stream: the reference reads it (no Python error set) */

enum { F_CONTENT = 0, F_REASONING = 1, F_REASONING_CONTENT = 2 };

typedef struct {
    PyObject *index;        /* the choice's index (an int) */
    PyObject *role;         /* NULL: None */
    PyObject *content;      /* a list of its pieces; NULL: None */
    PyObject *reasoning;    /* a list of its pieces; NULL: None */
    int fields;             /* the reasoning fields seen: 1 << F_REASONING, 1 << F_REASONING_CONTENT */
    PyObject *finish;       /* NULL: None */
    PyObject *finish_event; /* NULL: None */
    PyObject *stop_reason;  /* NULL: None */
    PyObject *at_end;       /* NULL: "" */
} Choice;

typedef struct {
    PyObject *before, *after;
    Py_ssize_t cut, tail, least;
    int choice, field;
} Template;

typedef struct {
    Choice ch[MAX_CHOICES];
    int n_ch;
    Template tpl[MAX_TEMPLATES];
    int n_tpl;
    unsigned int tried[MAX_CHOICES]; /* per choice, the fields whose template was tried */
    PyObject *id0, *model, *fingerprint, *usage, *done_event, *first_event, *first_token,
        *last_token, *times;
    Py_ssize_t usage_chunks, usage_only, frames, tokens;
    int done;
} Plain;

static void
plain_clear(Plain *p)
{
    for (int i = 0; i < p->n_ch; i++) {
        Choice *c = &p->ch[i];
        Py_XDECREF(c->index);
        Py_XDECREF(c->role);
        Py_XDECREF(c->content);
        Py_XDECREF(c->reasoning);
        Py_XDECREF(c->finish);
        Py_XDECREF(c->finish_event);
        Py_XDECREF(c->stop_reason);
        Py_XDECREF(c->at_end);
    }
    for (int i = 0; i < p->n_tpl; i++) {
        Py_XDECREF(p->tpl[i].before);
        Py_XDECREF(p->tpl[i].after);
    }
    Py_XDECREF(p->id0);
    Py_XDECREF(p->model);
    Py_XDECREF(p->fingerprint);
    Py_XDECREF(p->usage);
    Py_XDECREF(p->done_event);
    Py_XDECREF(p->first_event);
    Py_XDECREF(p->first_token);
    Py_XDECREF(p->last_token);
    Py_XDECREF(p->times);
}

/* Whether two str are equal (``b`` exact): what _PyUnicode_Equal says, which Python 3.13 no longer
 * exports. Equal strings are held in the same kind, so their bytes compare. */
static int
str_equal(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (!PyUnicode_Check(a))
        return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
}

/* Appends ``text`` to the pieces at *list (made on the first): 0, or -1 with an error set. */
static int
add_piece(PyObject **list, PyObject *text)
{
    if (*list == NULL && (*list = PyList_New(0)) == NULL)
        return -1;
    return PyList_Append(*list, text);
}

/* A token's chunk arrived at ``t`` (None: no offset): _assembly._stamp. */
static int
stamp(Plain *p, PyObject *t)
{
    p->tokens++;
    if (t == Py_None)
        return 0;
    if (p->first_token == NULL)
        p->first_token = Py_NewRef(t);
    Py_XSETREF(p->last_token, Py_NewRef(t));
    return PyList_Append(p->times, t);
}

/* The value of ``key`` in ``d``, borrowed, or NULL (with an error set only where looking failed). */
static PyObject *
get(PyObject *d, PyObject *key)
{
    return PyDict_GetItemWithError(d, key);
}

/* The position of the choice of this index (made on the first chunk of it), -1 with an error set,
 * or -2 where it is not one this reads (not an int, or too many choices). */
static int
choice_at(Plain *p, PyObject *idx)
{
    if (!PyLong_CheckExact(idx))
        return -2;
    for (int i = 0; i < p->n_ch; i++) {
        int eq = PyObject_RichCompareBool(p->ch[i].index, idx, Py_EQ);
        if (eq < 0)
            return -1;
        if (eq)
            return i;
    }
    if (p->n_ch == MAX_CHOICES)
        return -2;
    Choice *c = &p->ch[p->n_ch];
    memset(c, 0, sizeof(*c));
    c->index = Py_NewRef(idx);
    return p->n_ch++;
}

/* _assembly._take_delta of a delta this reads: 1 where it carried output, 0 where not, -1 with an
 * error set, BAIL + 1 where it is not plain. */
static int
take_delta(Choice *c, PyObject *delta)
{
    PyObject *content = get(delta, s_content);
    if (content == NULL && PyErr_Occurred())
        return -1;
    if (PyDict_GET_SIZE(delta) == 1 && content != NULL && PyUnicode_Check(content)) {
        if (add_piece(&c->content, content) < 0)
            return -1;
        int token = PyUnicode_GET_LENGTH(content) > 0;
        return token && c->finish != NULL ? BAIL + 1 : token;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(delta, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key))
            return BAIL + 1;
        if (!str_equal(key, s_role) && !str_equal(key, s_content) &&
            !str_equal(key, s_reasoning) && !str_equal(key, s_reasoning_content))
            return BAIL + 1; /* a call, a refusal, audio or a key of its own: the reference's */
    }
    int after_finish = c->finish != NULL, token = 0;
    PyObject *role = get(delta, s_role);
    if (role == NULL && PyErr_Occurred())
        return -1;
    if (role != NULL && role != Py_None && c->role == NULL)
        c->role = Py_NewRef(role);
    if (content != NULL && content != Py_None) {
        if (!PyUnicode_Check(content))
            return BAIL + 1;
        if (add_piece(&c->content, content) < 0)
            return -1;
        token |= PyUnicode_GET_LENGTH(content) > 0;
    }
    PyObject *r1 = get(delta, s_reasoning);
    if (r1 == NULL && PyErr_Occurred())
        return -1;
    PyObject *r2 = get(delta, s_reasoning_content);
    if (r2 == NULL && PyErr_Occurred())
        return -1;
    if (r1 == Py_None)
        r1 = NULL;
    if (r2 == Py_None)
        r2 = NULL;
    if (r1 != NULL || r2 != NULL) {
        if (r1 != NULL)
            c->fields |= 1 << F_REASONING;
        if (r2 != NULL)
            c->fields |= 1 << F_REASONING_CONTENT;
        if (r1 != NULL && r2 != NULL) {
            int eq = PyObject_RichCompareBool(r1, r2, Py_EQ);
            if (eq < 0)
                return -1;
            if (!eq)
                return BAIL + 1;
        }
        PyObject *piece = r1 != NULL ? r1 : r2;
        if (!PyUnicode_Check(piece))
            return BAIL + 1;
        if (add_piece(&c->reasoning, piece) < 0)
            return -1;
        token |= PyUnicode_GET_LENGTH(piece) > 0;
    }
    return token && after_finish ? BAIL + 1 : token;
}

/* _assembly._take_chunk of a chunk this reads: 0, -1 with an error set, or BAIL. With ``single``,
 * where the chunk was one text field of one choice under way and nothing else (what a template is
 * learned from), its choice's position and the field are left there; else *single is -1. */
static int
take_chunk(Plain *p, PyObject *obj, PyObject *n, PyObject *t, int *single, int *field)
{
    *single = -1;
    PyObject *cid = get(obj, s_id);
    if (cid == NULL && PyErr_Occurred())
        return -1;
    if (cid != NULL && PyUnicode_Check(cid)) {
        if (p->id0 == NULL)
            p->id0 = Py_NewRef(cid);
        else {
            int eq = PyObject_RichCompareBool(cid, p->id0, Py_EQ);
            if (eq < 0)
                return -1;
            if (!eq)
                return BAIL;
        }
    }
    PyObject *model = get(obj, s_model);
    if (model == NULL && PyErr_Occurred())
        return -1;
    if (model != NULL && PyUnicode_Check(model)) {
        if (p->model == NULL)
            p->model = Py_NewRef(model);
        else {
            int eq = PyObject_RichCompareBool(model, p->model, Py_EQ);
            if (eq < 0)
                return -1;
            if (!eq)
                return BAIL;
        }
    }
    PyObject *fp = get(obj, s_fingerprint);
    if (fp == NULL && PyErr_Occurred())
        return -1;
    if (fp != NULL && PyUnicode_Check(fp))
        Py_XSETREF(p->fingerprint, Py_NewRef(fp));
    PyObject *usage = get(obj, s_usage);
    if (usage == NULL && PyErr_Occurred())
        return -1;
    PyObject *choices = get(obj, s_choices);
    if (choices == NULL && PyErr_Occurred())
        return -1;
    if (usage != NULL && usage != Py_None) {
        if (!PyDict_Check(usage))
            return BAIL;
        Py_XSETREF(p->usage, Py_NewRef(usage));
        p->usage_chunks++;
        if (choices != NULL && PyList_Check(choices) && PyList_GET_SIZE(choices) == 0)
            p->usage_only++;
    }
    if (choices == NULL || !PyList_Check(choices))
        return BAIL;
    int token = 0, plain_text = PyList_GET_SIZE(choices) == 1 && (usage == NULL || usage == Py_None) &&
                                (fp == NULL || fp == Py_None);
    for (Py_ssize_t ci = 0; ci < PyList_GET_SIZE(choices); ci++) {
        PyObject *ch = PyList_GET_ITEM(choices, ci);
        if (!PyDict_Check(ch))
            return BAIL;
        Py_INCREF(ch); /* held: what follows may run code that changes the list */
        int r = -1, at = -1, was_under_way = 0, f = -1;
        PyObject *idx = get(ch, s_index), *delta, *fr;
        if (idx == NULL && PyErr_Occurred())
            goto chunk_done;
        if (idx == NULL)
            idx = PyLong_FromLong(0); /* ch.get("index", 0) */
        else
            Py_INCREF(idx);
        if (idx == NULL)
            goto chunk_done;
        at = choice_at(p, idx);
        Py_DECREF(idx);
        if (at < 0) {
            r = at == -2 ? BAIL : -1;
            goto chunk_done;
        }
        Choice *c = &p->ch[at];
        was_under_way = c->finish == NULL;
        delta = get(ch, s_delta);
        if (delta == NULL || !PyDict_Check(delta)) {
            r = delta == NULL && PyErr_Occurred() ? -1 : BAIL; /* none, or not an object: anomalies */
            goto chunk_done;
        }
        if (PyDict_GET_SIZE(delta) == 1) { /* the one key of a text chunk, where it is one */
            PyObject *key, *value;
            Py_ssize_t pos = 0;
            if (PyDict_Next(delta, &pos, &key, &value) && PyUnicode_CheckExact(value)) {
                f = str_equal(key, s_content)             ? F_CONTENT
                    : str_equal(key, s_reasoning)         ? F_REASONING
                    : str_equal(key, s_reasoning_content) ? F_REASONING_CONTENT
                                                                 : -1;
            }
        }
        if (PyDict_GET_SIZE(delta) > 0) {
            int got = take_delta(c, delta);
            if (got < 0 || got > 1) {
                r = got < 0 ? -1 : BAIL;
                goto chunk_done;
            }
            token |= got;
        }
        fr = get(ch, s_finish);
        if (fr == NULL && PyErr_Occurred())
            goto chunk_done;
        if (fr != NULL && fr != Py_None) {
            if (c->finish == NULL) {
                c->finish = Py_NewRef(fr);
                c->finish_event = Py_NewRef(n);
                PyObject *stop = get(ch, s_stop);
                if (stop == NULL && PyErr_Occurred())
                    goto chunk_done;
                c->stop_reason = stop != NULL && stop != Py_None ? Py_NewRef(stop) : NULL;
                /* delta.get("reasoning", delta.get("reasoning_content")) */
                int has = PyDict_Contains(delta, s_reasoning);
                if (has < 0)
                    goto chunk_done;
                PyObject *piece = get(delta, has ? s_reasoning : s_reasoning_content);
                if (piece == NULL && PyErr_Occurred())
                    goto chunk_done;
                c->at_end = piece != NULL && PyUnicode_Check(piece) ? Py_NewRef(piece) : NULL;
            } else {
                int eq = PyObject_RichCompareBool(fr, c->finish, Py_EQ);
                if (eq < 0)
                    goto chunk_done;
                if (!eq) {
                    r = BAIL;
                    goto chunk_done;
                }
            }
            f = -1;
        }
        r = 0;
        if (plain_text && f >= 0 && was_under_way) {
            *single = at;
            *field = f;
        }
    chunk_done:
        Py_DECREF(ch);
        if (r != 0)
            return r;
    }
    return token ? stamp(p, t) : 0;
}

/* The string a JSON text holds from ``at`` on (its quotes included) ends at: the offset past its
 * closing quote, or -1 where none closes it (_assembly._JSON_STRING). */
static Py_ssize_t
string_end(PyObject *data, Py_ssize_t at)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(data);
    int kind = PyUnicode_KIND(data);
    const void *text = PyUnicode_DATA(data);
    if (at >= n || PyUnicode_READ(kind, text, at) != '"')
        return -1;
    for (Py_ssize_t i = at + 1; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, text, i);
        if (c == '\\')
            i++;
        else if (c == '"')
            return i + 1;
    }
    return -1;
}

/* Learns the template of a text chunk (``data``, read as ``obj``; its text ``text`` of the field
 * ``field`` of the choice at ``at``), as _assembly._template does: 0 learned or not (a template only
 * makes the reading faster: whatever stops it leaves none), -1 with an error set. */
static int
learn(Plain *p, PyObject *data, PyObject *obj, PyObject *text, int at, int field, PyObject *loads,
      PyObject *probe_text, PyObject *probed)
{
    if (p->n_tpl == MAX_TEMPLATES)
        return 0;
    int same = PyObject_RichCompareBool(text, probed, Py_EQ);
    if (same != 0)
        return same < 0 ? -1 : 0;
    PyObject *name = field == F_CONTENT ? s_content : field == F_REASONING ? s_reasoning : s_reasoning_content;
    PyObject *key = PyUnicode_FromFormat("\"%U\":", name);
    if (key == NULL)
        return -1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(data), k = PyUnicode_GET_LENGTH(key);
    Py_ssize_t found = PyUnicode_Find(data, key, 0, n, 1), again = -1;
    if (found >= 0)
        again = PyUnicode_Find(data, key, found + 1, n, 1);
    Py_DECREF(key);
    if (found == -2 || again == -2)
        return -1;
    if (found < 0 || again >= 0)
        return 0;
    Py_ssize_t start = found + k;
    int kind = PyUnicode_KIND(data);
    const void *chars = PyUnicode_DATA(data);
    while (start < n) {
        Py_UCS4 c = PyUnicode_READ(kind, chars, start);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        start++;
    }
    Py_ssize_t end = string_end(data, start);
    if (end < 0 || end == n)
        return 0;
    int rc = -1;
    PyObject *before = PyUnicode_Substring(data, 0, start), *after = PyUnicode_Substring(data, end, n);
    PyObject *joined = NULL, *probe = NULL;
    if (before == NULL || after == NULL)
        goto done;
    PyObject *parts[3] = {before, probe_text, after};
    PyObject *list = PyList_New(3);
    if (list == NULL)
        goto done;
    for (int i = 0; i < 3; i++)
        PyList_SET_ITEM(list, i, Py_NewRef(parts[i]));
    joined = PyUnicode_Join(s_empty, list);
    Py_DECREF(list);
    if (joined == NULL)
        goto done;
    probe = PyObject_CallOneArg(loads, joined);
    if (probe == NULL) { /* not JSON with the probe in: no template */
        PyErr_Clear();
        rc = 0;
        goto done;
    }
    /* probe["choices"][0]["delta"][field] is the probe, and with the text there it is ``obj`` */
    rc = 0;
    PyObject *holder = PyDict_Check(probe) ? get(probe, s_choices) : NULL;
    if (holder == NULL || !PyList_Check(holder) || PyList_GET_SIZE(holder) == 0)
        goto clear;
    holder = PyList_GET_ITEM(holder, 0);
    if (!PyDict_Check(holder) || (holder = get(holder, s_delta)) == NULL || !PyDict_Check(holder))
        goto clear;
    PyObject *was = get(holder, name);
    if (was == NULL)
        goto clear;
    int eq = PyObject_RichCompareBool(was, probed, Py_EQ);
    if (eq <= 0)
        goto clear;
    if (PyDict_SetItem(holder, name, text) < 0 || (eq = PyObject_RichCompareBool(probe, obj, Py_EQ)) < 0) {
        rc = -1;
        goto done;
    }
    if (eq) {
        Template *t = &p->tpl[p->n_tpl++];
        t->before = Py_NewRef(before);
        t->after = Py_NewRef(after);
        t->cut = start;
        t->tail = n - end;
        t->least = t->cut + t->tail + 2;
        t->choice = at;
        t->field = field;
    }
clear:
    if (PyErr_Occurred()) /* a lookup of the probe's that failed: no template */
        PyErr_Clear();
done:
    Py_XDECREF(before);
    Py_XDECREF(after);
    Py_XDECREF(joined);
    Py_XDECREF(probe);
    return rc;
}

/* The text of ``data`` through a template of a choice under way: a new str, NULL with *at -1 where
 * none reads it, NULL with an error set. */
static PyObject *
through_template(Plain *p, PyObject *data, Py_ssize_t most, int *at)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(data);
    int kind = PyUnicode_KIND(data);
    const void *chars = PyUnicode_DATA(data);
    for (int i = 0; i < p->n_tpl; i++) {
        Template *t = &p->tpl[i];
        if (p->ch[t->choice].finish != NULL || n < t->least || n > most ||
            PyUnicode_Tailmatch(data, t->before, 0, n, -1) != 1 || PyUnicode_Tailmatch(data, t->after, 0, n, 1) != 1)
            continue;
        Py_ssize_t len = 0, w = 0;
        Py_UCS4 maxchar = 0;
        if (json_string(kind, chars, t->cut, n - t->tail, 0, NULL, NULL, &len, &maxchar) < 0)
            continue;
        PyObject *text = PyUnicode_New(len, maxchar);
        if (text == NULL)
            return NULL;
        json_string(kind, chars, t->cut, n - t->tail, PyUnicode_KIND(text), PyUnicode_DATA(text), &w, &len,
                    &maxchar);
        *at = i;
        return text;
    }
    *at = -1;
    return NULL;
}

/* Sets ``value`` (stolen; NULL with an error set: fails) as ``name`` of ``obj``. */
static int
set_stolen(PyObject *obj, PyObject *name, PyObject *value)
{
    if (value == NULL)
        return -1;
    int rc = PyObject_SetAttr(obj, name, value);
    Py_DECREF(value);
    return rc;
}

static int
set_ref(PyObject *obj, PyObject *name, PyObject *value)
{
    return PyObject_SetAttr(obj, name, value == NULL ? Py_None : value);
}

/* The pieces joined, or None. */
static PyObject *
joined_or_none(PyObject *pieces)
{
    return pieces == NULL ? Py_NewRef(Py_None) : PyUnicode_Join(s_empty, pieces);
}

/* The assembled stream of what was read: an instance of ``stream_cls`` with its choices. */
static PyObject *
made(Plain *p, Py_ssize_t events, PyObject *stream_cls, PyObject *choice_cls)
{
    PyObject *st = PyObject_CallNoArgs(stream_cls);
    if (st == NULL)
        return NULL;
    PyObject *choices = PyDict_New();
    if (choices == NULL)
        goto fail;
    for (int i = 0; i < p->n_ch; i++) {
        Choice *c = &p->ch[i];
        PyObject *one = PyObject_CallOneArg(choice_cls, c->index);
        if (one == NULL || PyDict_SetItem(choices, c->index, one) < 0) {
            Py_XDECREF(one);
            goto fail_choices;
        }
        Py_DECREF(one); /* held by the dict */
        if (set_ref(one, s_role, c->role) < 0 || set_stolen(one, s_content, joined_or_none(c->content)) < 0 ||
            set_stolen(one, s_reasoning, joined_or_none(c->reasoning)) < 0 ||
            set_ref(one, s_finish, c->finish) < 0 || set_ref(one, s_finish_event, c->finish_event) < 0 ||
            set_ref(one, s_stop_reason, c->stop_reason) < 0 ||
            PyObject_SetAttr(one, s_at_end, c->at_end == NULL ? s_empty : c->at_end) < 0)
            goto fail_choices;
        if (c->fields) {
            PyObject *fields = PyObject_GetAttr(one, s_reasoning_fields);
            int bad = fields == NULL || !PySet_Check(fields) ||
                      ((c->fields & (1 << F_REASONING)) && PySet_Add(fields, s_reasoning) < 0) ||
                      ((c->fields & (1 << F_REASONING_CONTENT)) && PySet_Add(fields, s_reasoning_content) < 0);
            if (bad && fields != NULL && !PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a choice's reasoning_fields is not a set");
            Py_XDECREF(fields);
            if (bad)
                goto fail_choices;
        }
    }
    PyObject *ids = p->id0 == NULL ? PyList_New(0) : PyList_New(1);
    if (ids != NULL && p->id0 != NULL)
        PyList_SET_ITEM(ids, 0, Py_NewRef(p->id0));
    if (set_stolen(st, s_events, PyLong_FromSsize_t(events)) < 0 ||
        set_stolen(st, s_frames, PyLong_FromSsize_t(p->frames)) < 0 || PyObject_SetAttr(st, s_choices, choices) < 0 ||
        set_ref(st, s_usage, p->usage) < 0 || set_stolen(st, s_usage_chunks, PyLong_FromSsize_t(p->usage_chunks)) < 0 ||
        set_stolen(st, s_usage_only, PyLong_FromSsize_t(p->usage_only)) < 0 ||
        set_stolen(st, s_done, PyLong_FromLong(p->done)) < 0 || set_ref(st, s_done_event, p->done_event) < 0 ||
        set_stolen(st, s_ids, ids) < 0 || set_ref(st, s_model, p->model) < 0 ||
        set_ref(st, s_fingerprint, p->fingerprint) < 0 || set_ref(st, s_first_event, p->first_event) < 0 ||
        set_ref(st, s_first_token, p->first_token) < 0 || set_ref(st, s_last_token, p->last_token) < 0 ||
        set_stolen(st, s_token_events, PyLong_FromSsize_t(p->tokens)) < 0 ||
        PyObject_SetAttr(st, s_token_times, p->times) < 0)
        goto fail_choices;
    Py_DECREF(choices);
    return st;
fail_choices:
    Py_DECREF(choices);
fail:
    Py_DECREF(st);
    return NULL;
}

static PyObject *
assemble_plain(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "assemble_plain takes events, cls, stream_cls, choice_cls, loads, "
                                         "bounded, short, most, probe, probed");
        return NULL;
    }
    PyObject *events = args[0], *stream_cls = args[2], *choice_cls = args[3], *loads = args[4],
             *bounded = args[5], *probe_text = args[8], *probed = args[9];
    if (!PyList_CheckExact(events) || !PyType_Check(args[1]) || !PyLong_CheckExact(args[6]) ||
        !PyLong_CheckExact(args[7]) || !PyUnicode_CheckExact(probe_text))
        Py_RETURN_NONE;
    PyTypeObject *cls = (PyTypeObject *)args[1];
    Py_ssize_t shortest = PyLong_AsSsize_t(args[6]), most = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t data_at = slot_offset(cls, data_name), t_at = slot_offset(cls, t_name),
               n_at = slot_offset(cls, s_index);
    if (data_at < 0 || t_at < 0 || n_at < 0)
        Py_RETURN_NONE;

    Plain p;
    memset(&p, 0, sizeof(p));
    if ((p.times = PyList_New(0)) == NULL)
        return NULL;
    Py_ssize_t size = PyList_GET_SIZE(events);
    int rc = 0;
    for (Py_ssize_t k = 0; k < size && k < PyList_GET_SIZE(events) && rc == 0; k++) {
        PyObject *ev = PyList_GET_ITEM(events, k);
        PyObject *data = event_data(ev, cls, data_at, t_at);
        PyObject *n = Py_IS_TYPE(ev, cls) ? *(PyObject **)((char *)ev + n_at) : NULL;
        if (data == NULL || n == NULL) {
            rc = BAIL;
            break;
        }
        Py_INCREF(ev); /* held, with what is read of it, while code may run */
        PyObject *t = *(PyObject **)((char *)ev + t_at);
        if (p.first_event == NULL && t != Py_None)
            p.first_event = Py_NewRef(t);
        PyObject *obj = NULL, *text = NULL;
        int at;
        if (p.done) {
            rc = BAIL; /* anything after [DONE]: an anomaly */
            goto next;
        }
        if ((text = through_template(&p, data, most, &at)) != NULL) {
            Template *tpl = &p.tpl[at];
            Choice *c = &p.ch[tpl->choice];
            p.frames++;
            if (tpl->field == F_CONTENT)
                rc = add_piece(&c->content, text);
            else {
                c->fields |= 1 << tpl->field;
                rc = add_piece(&c->reasoning, text);
            }
            if (rc == 0 && PyUnicode_GET_LENGTH(text) > 0)
                rc = stamp(&p, t);
            goto next;
        }
        if (PyErr_Occurred()) {
            rc = -1;
            goto next;
        }
        if (str_equal(data, s_done_text)) {
            p.done = 1;
            p.done_event = Py_NewRef(n);
            goto next;
        }
        obj = PyObject_CallOneArg(PyUnicode_GET_LENGTH(data) <= shortest ? loads : bounded, data);
        if (obj == NULL) {
            PyErr_Clear(); /* not JSON, or past the bounds: the reference says which */
            rc = BAIL;
            goto next;
        }
        if (!PyDict_CheckExact(obj)) {
            rc = BAIL;
            goto next;
        }
        p.frames++;
        {
            int single = -1, field = F_CONTENT;
            rc = take_chunk(&p, obj, n, t, &single, &field);
            if (rc == 0 && single >= 0 && !(p.tried[single] & (1u << field))) {
                p.tried[single] |= 1u << field;
                PyObject *name = field == F_CONTENT ? s_content : field == F_REASONING ? s_reasoning : s_reasoning_content;
                /* the chunk's text: its one choice's delta's one value */
                PyObject *choices = get(obj, s_choices), *ch, *delta, *value = NULL;
                if (choices != NULL && PyList_Check(choices) && PyList_GET_SIZE(choices) == 1 &&
                    PyDict_Check(ch = PyList_GET_ITEM(choices, 0)) && (delta = get(ch, s_delta)) != NULL &&
                    PyDict_Check(delta))
                    value = get(delta, name);
                if (value != NULL && PyUnicode_CheckExact(value)) {
                    Py_INCREF(value);
                    rc = learn(&p, data, obj, value, single, field, loads, probe_text, probed);
                    Py_DECREF(value);
                } else if (PyErr_Occurred())
                    rc = -1;
            }
        }
    next:
        Py_XDECREF(obj);
        Py_XDECREF(text);
        Py_DECREF(ev);
    }
    PyObject *result = NULL;
    if (rc == 0 && PyList_GET_SIZE(events) != size)
        rc = BAIL; /* the list changed while a read ran code: the reference reads what it holds now */
    if (rc == 0)
        result = made(&p, size, stream_cls, choice_cls);
    else if (rc == BAIL)
        result = Py_NewRef(Py_None);
    plain_clear(&p);
    return result;
}

static PyMethodDef methods[] = {
    {"fold_text", (PyCFunction)(void (*)(void))fold_text, METH_FASTCALL,
     "fold_text(events, start, before, after, least, most, cls) -> (end, text, tokens, times) | None"},
    {"assemble_plain", (PyCFunction)(void (*)(void))assemble_plain, METH_FASTCALL,
     "assemble_plain(events, cls, stream_cls, choice_cls, loads, bounded, short, most, probe, probed) "
     "-> AssembledStream | None"},
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
    static struct {
        PyObject **name;
        const char *text;
    } const names[] = {
        {&s_id, "id"},
        {&s_model, "model"},
        {&s_fingerprint, "system_fingerprint"},
        {&s_usage, "usage"},
        {&s_choices, "choices"},
        {&s_index, "index"},
        {&s_delta, "delta"},
        {&s_finish, "finish_reason"},
        {&s_stop, "stop_reason"},
        {&s_role, "role"},
        {&s_content, "content"},
        {&s_reasoning, "reasoning"},
        {&s_reasoning_content, "reasoning_content"},
        {&s_events, "events"},
        {&s_frames, "frames"},
        {&s_usage_chunks, "usage_chunks"},
        {&s_usage_only, "usage_only_chunks"},
        {&s_done, "done"},
        {&s_done_event, "done_event"},
        {&s_ids, "ids"},
        {&s_first_event, "first_event_ms"},
        {&s_first_token, "first_token_ms"},
        {&s_last_token, "last_token_ms"},
        {&s_token_events, "token_events"},
        {&s_token_times, "token_times"},
        {&s_reasoning_fields, "reasoning_fields"},
        {&s_finish_event, "finish_event"},
        {&s_stop_reason, "stop_reason"},
        {&s_at_end, "reasoning_at_end"},
        {&s_done_text, "[DONE]"},
        {&s_empty, ""},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (*names[i].name == NULL && (*names[i].name = PyUnicode_InternFromString(names[i].text)) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
