/* The compiled twin of the header lines of a message head, once an exchange each way: the upstream
 * request's (proxy/_upstream.py, _Raw.open) and the caller's response's (proxy/_http.py,
 * _Cycle._start). In Python each header was a few list items and, for a response, two regular
 * expression searches, a lower() and three comparisons; here each is one pass over its bytes and
 * one copy, and no object is made but the lines.
 *
 * request_lines(headers) -> bytes | None: each ``name: value\r\n`` as given.
 * response_lines(headers) -> bytes | None: the same with each name in lower case, for a response
 * whose framing the headers do not touch: None where a name or a value holds a character the
 * Python path refuses (it then raises its error), where a header is content-length,
 * transfer-encoding or connection (their meaning is the Python path's), or where the list is not a
 * list of pairs of bytes. The Python path then does the head; tests/proxy/test_heads_c.py holds
 * the two to the same bytes and the same state. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* the characters _BAD_NAME and _BAD_VALUE match (proxy/_http.py): controls and RFC 9110's
 * separators in a name, controls but tab in a value */
static int bad_name_char(unsigned char c) {
    return c <= 0x1f || c == 0x7f || (c != 0 && strchr("()<>@,;:[]={} \t\\\"", c) != NULL);
}

static int bad_value_char(unsigned char c) { return (c <= 0x1f && c != '\t') || c == 0x7f; }

/* whether ``name`` (``len`` bytes) in lower case is ``word`` (lower case already) */
static int is_lower(const char *name, Py_ssize_t len, const char *word) {
    if ((size_t)len != strlen(word))
        return 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (c != (unsigned char)word[i])
            return 0;
    }
    return 1;
}

/* the pair at ``i`` as two exact bytes objects (borrowed), or 0 */
static int pair_at(PyObject *headers, Py_ssize_t i, PyObject **name, PyObject **value) {
    PyObject *item = PyList_GET_ITEM(headers, i);
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2)
        return 0;
    *name = PyTuple_GET_ITEM(item, 0);
    *value = PyTuple_GET_ITEM(item, 1);
    return PyBytes_CheckExact(*name) && PyBytes_CheckExact(*value);
}

static PyObject *lines(PyObject *headers, int response) {
    if (!PyList_CheckExact(headers))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(headers), total = 0;
    PyObject *name, *value;
    /* first the checks and the size: nothing here runs Python code or allocates */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!pair_at(headers, i, &name, &value))
            Py_RETURN_NONE;
        const char *k = PyBytes_AS_STRING(name), *v = PyBytes_AS_STRING(value);
        Py_ssize_t klen = PyBytes_GET_SIZE(name), vlen = PyBytes_GET_SIZE(value);
        if (response) {
            for (Py_ssize_t j = 0; j < klen; j++)
                if (bad_name_char((unsigned char)k[j]))
                    Py_RETURN_NONE;
            for (Py_ssize_t j = 0; j < vlen; j++)
                if (bad_value_char((unsigned char)v[j]))
                    Py_RETURN_NONE;
            if (is_lower(k, klen, "content-length") || is_lower(k, klen, "transfer-encoding") ||
                is_lower(k, klen, "connection"))
                Py_RETURN_NONE;
        }
        /* in size_t, where the sum of two sizes cannot wrap */
        size_t line = (size_t)klen + (size_t)vlen + 4;
        if (line > (size_t)PY_SSIZE_T_MAX - (size_t)total)
            Py_RETURN_NONE; /* past any size a head can have: the Python path says so */
        total += (Py_ssize_t)line;
    }
    /* a bytes object is not tracked by the cyclic GC, so making it runs no finalizer: the list and
     * its items are as they were; each copy is still checked against the room left */
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    char *at = PyBytes_AS_STRING(out), *end = at + total;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PyList_GET_SIZE(headers) || !pair_at(headers, i, &name, &value))
            goto changed;
        Py_ssize_t klen = PyBytes_GET_SIZE(name), vlen = PyBytes_GET_SIZE(value);
        if ((size_t)(end - at) < (size_t)klen + (size_t)vlen + 4)
            goto changed;
        memcpy(at, PyBytes_AS_STRING(name), (size_t)klen);
        if (response)
            for (Py_ssize_t j = 0; j < klen; j++)
                if (at[j] >= 'A' && at[j] <= 'Z')
                    at[j] = (char)(at[j] - 'A' + 'a');
        at += klen;
        memcpy(at, ": ", 2);
        at += 2;
        memcpy(at, PyBytes_AS_STRING(value), (size_t)vlen);
        at += vlen;
        memcpy(at, "\r\n", 2);
        at += 2;
    }
    if (at != end)
        goto changed;
    return out;
changed:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyObject *request_lines(PyObject *self, PyObject *headers) { return lines(headers, 0); }

/* ---------------------------------------------------------------------------------------------- */
/* parse_request: a whole request of the common shape, read in one go */

/* the methods taken here, and their names as the scope holds them (made when the module loads) */
static const char *const METHODS[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"};
#define NMETHODS (sizeof(METHODS) / sizeof(METHODS[0]))
static PyObject *method_names[NMETHODS];
static PyObject *version_11, *version_10, *empty_bytes;

/* RFC 9110's token characters */
static int tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* the characters of an origin-form target taken here: RFC 3986's unreserved, sub-delims, ":", "@",
 * "/", "?" and "%" (no fragment, and none of the characters a URL parser may refuse or read apart) */
static int target_char(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("-._~!$&'()*+,;=:@/?%", c) != NULL);
}

static int ows(unsigned char c) { return c == ' ' || c == '\t'; }

/* a character taken in a header value or a reason phrase: visible ASCII, a space or a tab */
static int field_char(unsigned char c) { return c < 0x20 ? c == '\t' : c <= 0x7e; }

/* whether the value [v, e) is a list of tokens, each "close" or "keep-alive", with optional
 * whitespace around the commas; *close is set where one is "close" */
static int connection_tokens(const unsigned char *v, const unsigned char *e, int *close) {
    const unsigned char *p = v;
    for (;;) {
        while (p < e && ows(*p))
            p++;
        const unsigned char *t = p;
        while (p < e && tchar(*p))
            p++;
        if (p == t)
            return 0;
        if (is_lower((const char *)t, p - t, "close"))
            *close = 1;
        else if (!is_lower((const char *)t, p - t, "keep-alive"))
            return 0;
        while (p < e && ows(*p))
            p++;
        if (p == e)
            return 1;
        if (*p != ',')
            return 0;
        p++;
    }
}

/* a header line at p: its name [*name, *name_end) and value [*value, *value_end) as llhttp hands them
 * (the value from its first character that is not a space or tab, to the line's end), p moved past
 * its CRLF; 0 where it is not of the plain shape (a token, a colon, visible ASCII, spaces and tabs,
 * CRLF) or not all there */
static int header_line(const unsigned char **at, const unsigned char *end, const unsigned char **name,
                       const unsigned char **name_end, const unsigned char **value,
                       const unsigned char **value_end) {
    const unsigned char *p = *at;
    *name = p;
    while (p < end && tchar(*p))
        p++;
    if (p == *name || p >= end || *p != ':')
        return 0;
    *name_end = p++;
    while (p < end && ows(*p))
        p++;
    *value = p;
    while (p < end && *p != '\r') {
        if (!field_char(*p))
            return 0;
        p++;
    }
    if (end - p < 2 || p[1] != '\n')
        return 0;
    *value_end = p;
    *at = p + 2;
    return 1;
}

/* parse_request's and parse_response's arguments: 1 with the data's bounds and max_head set; 0 for
 * arguments of another type (the caller answers None); -1 with TypeError for another count */
static int head_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, const unsigned char **p,
                     const unsigned char **end, Py_ssize_t *max_head) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes 2 arguments (%zd given)", fname, nargs);
        return -1;
    }
    if (!PyBytes_CheckExact(args[0]) || !PyLong_CheckExact(args[1]))
        return 0;
    *max_head = PyLong_AsSsize_t(args[1]);
    if (*max_head == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *p = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    *end = *p + PyBytes_GET_SIZE(args[0]);
    return 1;
}

/* parse_request(data, max_head) -> (method, path, query, version, headers, keep_alive, body) | None
 *
 * ``data`` when it is exactly one whole request of the shape every SDK sends: a known method, an
 * origin-form target of plain characters, HTTP/1.1 or 1.0, header lines of a token, a colon and a
 * value of visible ASCII, spaces and tabs, each ended by CRLF, a body of exactly its content-length
 * (none without one) and nothing after it. The headers come as the listener's parser callbacks make
 * them (proxy/_http.py): names in lower case, values without the whitespace around them. None for
 * anything else (a head not all there, or over ``max_head`` as the listener counts it, a
 * transfer-encoding, an expect, an upgrade, a connection header of other tokens, a second
 * content-length, a byte past ASCII, a pipelined request behind it): httptools then parses it, as it
 * does every request where this module is not built. tests/proxy/test_parse_request.py holds the two
 * to the same result. */
static PyObject *parse_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const unsigned char *p, *end;
    Py_ssize_t max_head;
    int ok = head_args("parse_request", args, nargs, &p, &end, &max_head);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    const unsigned char *start = p;

    /* the request line */
    size_t m = 0;
    for (; m < NMETHODS; m++) {
        size_t len = strlen(METHODS[m]);
        if ((size_t)(end - p) > len && memcmp(p, METHODS[m], len) == 0 && p[len] == ' ') {
            p += len + 1;
            break;
        }
    }
    if (m == NMETHODS)
        Py_RETURN_NONE;
    const unsigned char *target = p, *question = NULL;
    if (p >= end || *p != '/')
        Py_RETURN_NONE;
    while (p < end && *p != ' ') {
        if (!target_char(*p))
            Py_RETURN_NONE;
        if (*p == '?' && question == NULL)
            question = p;
        p++;
    }
    const unsigned char *target_end = p;
    if (end - p < 11 || memcmp(p, " HTTP/1.", 8) != 0 || (p[8] != '1' && p[8] != '0') || p[9] != '\r' ||
        p[10] != '\n')
        Py_RETURN_NONE;
    int http11 = p[8] == '1';
    p += 11;
    /* the head as the listener counts it from its parser's callbacks: 16 for the request line's
     * method, version and line ends, the target, and each header's name and value (as the parser
     * gives it: without the whitespace before it) and 4 */
    size_t counted = 16 + (size_t)(target_end - target);

    PyObject *headers = PyList_New(0);
    if (headers == NULL)
        return NULL;
    int close = 0, have_length = 0;
    size_t length = 0;
    for (;;) {
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') {
            p += 2;
            break;
        }
        const unsigned char *name, *name_end, *value, *value_end;
        if (!header_line(&p, end, &name, &name_end, &value, &value_end))
            goto decline; /* not of the plain shape, or the head is not all here */
        counted += (size_t)(name_end - name) + (size_t)(value_end - value) + 4;
        while (value_end > value && ows(value_end[-1]))
            value_end--; /* the listener's rstrip */
        if (counted > (size_t)max_head)
            goto decline;
        Py_ssize_t nlen = name_end - name, vlen = value_end - value;
        const char *n = (const char *)name;
        if (is_lower(n, nlen, "content-length")) {
            if (have_length || vlen == 0 || vlen > 15)
                goto decline;
            for (Py_ssize_t i = 0; i < vlen; i++) {
                if (value[i] < '0' || value[i] > '9')
                    goto decline;
                length = length * 10 + (size_t)(value[i] - '0');
            }
            have_length = 1;
        } else if (is_lower(n, nlen, "connection")) {
            if (!connection_tokens(value, value_end, &close))
                goto decline;
        } else if (is_lower(n, nlen, "transfer-encoding") || is_lower(n, nlen, "expect") ||
                   is_lower(n, nlen, "upgrade")) {
            goto decline;
        }
        /* made empty and then written: a bytes object made from one character is CPython's shared
         * one for it, which must never be written to */
        PyObject *k = PyBytes_FromStringAndSize(NULL, nlen);
        if (k == NULL)
            goto fail;
        char *kb = PyBytes_AS_STRING(k);
        for (Py_ssize_t i = 0; i < nlen; i++)
            kb[i] = (char)(n[i] >= 'A' && n[i] <= 'Z' ? n[i] - 'A' + 'a' : n[i]);
        PyObject *v = PyBytes_FromStringAndSize((const char *)value, vlen);
        if (v == NULL) {
            Py_DECREF(k);
            goto fail;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(k);
            Py_DECREF(v);
            goto fail;
        }
        PyTuple_SET_ITEM(pair, 0, k);
        PyTuple_SET_ITEM(pair, 1, v);
        int rc = PyList_Append(headers, pair);
        Py_DECREF(pair);
        if (rc < 0)
            goto fail;
    }
    if (p - start > max_head || (size_t)(end - p) != (have_length ? length : 0))
        goto decline; /* over the bound, a body not all here, or more after it */

    PyObject *path = PyBytes_FromStringAndSize((const char *)target,
                                               (question ? question : target_end) - target);
    PyObject *query = question ? PyBytes_FromStringAndSize((const char *)question + 1, target_end - question - 1)
                               : Py_NewRef(empty_bytes);
    PyObject *body = PyBytes_FromStringAndSize((const char *)p, end - p);
    PyObject *out = NULL;
    if (path != NULL && query != NULL && body != NULL)
        out = PyTuple_Pack(7, method_names[m], path, query, http11 ? version_11 : version_10, headers,
                           http11 && !close ? Py_True : Py_False, body);
    Py_XDECREF(path);
    Py_XDECREF(query);
    Py_XDECREF(body);
    Py_DECREF(headers);
    return out;
decline:
    Py_DECREF(headers);
    Py_RETURN_NONE;
fail:
    Py_DECREF(headers);
    return NULL;
}

static PyObject *response_lines(PyObject *self, PyObject *headers) { return lines(headers, 1); }

/* parse_response(data, max_head) -> (status, headers, close, head_len) | None
 *
 * The head at the start of ``data`` when it is a whole head of the shape an engine streams with: an
 * HTTP/1.1 status line of a status from 200 to 599 but 204 and 304, plain header lines (as
 * parse_request takes them), exactly one transfer-encoding, of ``chunked`` alone, and no
 * content-length, upgrade or other connection token than close and keep-alive (proxy-connection
 * counted as connection, as llhttp counts it). ``headers`` are (name, value) as the upstream
 * connection's parser callbacks make them: the name as sent, the value as llhttp hands it; ``close``:
 * a connection header says close; ``head_len``: the head's bytes (the body's chunks follow). None for
 * anything else, a head over ``max_head`` as the connection counts it included: llhttp then parses
 * it (proxy/_upstream.py, tests/proxy/test_relay_c.py). */
static PyObject *parse_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const unsigned char *p, *end;
    Py_ssize_t max_head;
    int ok = head_args("parse_response", args, nargs, &p, &end, &max_head);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    const unsigned char *start = p;
    if (end - p < 13 || memcmp(p, "HTTP/1.1 ", 9) != 0)
        Py_RETURN_NONE;
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            Py_RETURN_NONE;
        status = status * 10 + (p[i] - '0');
    }
    if (status < 200 || status > 599 || status == 204 || status == 304 || p[12] != ' ')
        Py_RETURN_NONE;
    p += 13;
    while (p < end && *p != '\r') { /* the reason phrase */
        if (!field_char(*p))
            Py_RETURN_NONE;
        p++;
    }
    if (end - p < 2 || p[1] != '\n')
        Py_RETURN_NONE;
    p += 2;
    PyObject *headers = PyList_New(0);
    if (headers == NULL)
        return NULL;
    size_t counted = 0; /* as _Conn.on_header counts the head: each name and value, and 4 */
    int close = 0, chunked = 0;
    for (;;) {
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') {
            p += 2;
            break;
        }
        const unsigned char *name, *name_end, *value, *value_end;
        if (!header_line(&p, end, &name, &name_end, &value, &value_end))
            goto decline;
        Py_ssize_t nlen = name_end - name, vlen = value_end - value;
        counted += (size_t)nlen + (size_t)vlen + 4;
        if (counted > (size_t)max_head)
            goto decline;
        const char *n = (const char *)name;
        if (is_lower(n, nlen, "transfer-encoding")) {
            const unsigned char *v = value, *e = value_end;
            while (e > v && ows(e[-1]))
                e--;
            if (chunked || !is_lower((const char *)v, e - v, "chunked"))
                goto decline;
            chunked = 1;
        } else if (is_lower(n, nlen, "connection") || is_lower(n, nlen, "proxy-connection")) {
            if (!connection_tokens(value, value_end, &close))
                goto decline;
        } else if (is_lower(n, nlen, "content-length") || is_lower(n, nlen, "upgrade")) {
            goto decline;
        }
        PyObject *pair = Py_BuildValue("(y#y#)", n, nlen, (const char *)value, vlen);
        if (pair == NULL)
            goto fail;
        int rc = PyList_Append(headers, pair);
        Py_DECREF(pair);
        if (rc < 0)
            goto fail;
    }
    if (!chunked || p - start > max_head)
        goto decline;
    PyObject *out = Py_BuildValue("(iOOn)", status, headers, close ? Py_True : Py_False, (Py_ssize_t)(p - start));
    Py_DECREF(headers);
    return out;
decline:
    Py_DECREF(headers);
    Py_RETURN_NONE;
fail:
    Py_DECREF(headers);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------- */
/* request_heads / response_heads: HeaderNames.request and .response (proxy/_heads.py) for headers
 * whose names the tap has seen */

/* the kinds of a name, as the ``known`` dict's (text, kind) values say them (_heads.py's _KIND_*) */
#define K_SECRET 1
#define K_HOP 2
#define K_LENGTH 4
#define K_CORR 8
#define K_CONNECTION 16

/* (text, kind) of a name in ``known``, borrowed; 0 where it is not there as such a pair */
static int known_name(PyObject *known, PyObject *name, PyObject **text, long *kind) {
    PyObject *entry = PyDict_GetItemWithError(known, name);
    if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2)
        return 0;
    *text = PyTuple_GET_ITEM(entry, 0);
    PyObject *k = PyTuple_GET_ITEM(entry, 1);
    if (!PyUnicode_CheckExact(*text) || !PyLong_CheckExact(k))
        return 0;
    *kind = PyLong_AsLong(k);
    return *kind != -1 || !PyErr_Occurred();
}

/* whether ``value`` holds "upgrade" in any case (the Python path then reads its tokens) */
static int has_upgrade(PyObject *value) {
    const char *v = PyBytes_AS_STRING(value);
    Py_ssize_t n = PyBytes_GET_SIZE(value);
    for (Py_ssize_t i = 0; i + 7 <= n; i++)
        if (is_lower(v + i, 7, "upgrade"))
            return 1;
    return 0;
}

/* appends (text, redacted if secret else the value as latin-1) to ``recorded``; -1 on error */
static int record_header(PyObject *recorded, PyObject *text, long kind, PyObject *value, PyObject *redacted) {
    PyObject *shown = kind & K_SECRET ? Py_NewRef(redacted)
                                      : PyUnicode_DecodeLatin1(PyBytes_AS_STRING(value),
                                                               PyBytes_GET_SIZE(value), NULL);
    if (shown == NULL)
        return -1;
    PyObject *pair = PyTuple_Pack(2, text, shown);
    Py_DECREF(shown);
    if (pair == NULL)
        return -1;
    int rc = PyList_Append(recorded, pair);
    Py_DECREF(pair);
    return rc;
}

/* request_heads(known, headers, keep_ids, redacted) -> (recorded, forwarded, ids) | None
 * response_heads(known, headers, redacted) -> (recorded, forwarded) | None
 *
 * ``known``: raw name -> (text, kind), as HeaderNames keeps it for the names it has seen. What
 * HeaderNames.request / .response make of ``headers`` (a list of pairs of bytes): the record's
 * (text, value) pairs, redacted; the pairs that go on (the same tuples); the correlation ids. None
 * where a name is not known, a pair is not two bytes, or a connection header holds "upgrade" (the
 * one case where the request may be a protocol upgrade): the Python path then does it all. tests/proxy/test_heads.py holds the two equal. */
static PyObject *heads(PyObject *known, PyObject *headers, int request, int keep_ids, PyObject *redacted) {
    if (!PyDict_CheckExact(known) || !PyList_CheckExact(headers) || !PyUnicode_CheckExact(redacted))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(headers);
    PyObject *recorded = PyList_New(0), *forwarded = PyList_New(0), *ids = request ? PyList_New(0) : NULL;
    PyObject *out = NULL;
    if (recorded == NULL || forwarded == NULL || (request && ids == NULL))
        goto done;
    /* the list's items are read anew at each step: nothing here runs Python code but the dict's
     * lookup of an exact bytes key and latin-1 decoding, neither of which can change the list */
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(headers); i++) {
        PyObject *item = PyList_GET_ITEM(headers, i), *name, *value, *text;
        long kind;
        if (!pair_at(headers, i, &name, &value) || !known_name(known, name, &text, &kind)) {
            if (PyErr_Occurred())
                goto done;
            out = Py_NewRef(Py_None);
            goto done;
        }
        if (request && (kind & K_CONNECTION) && has_upgrade(value)) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        if (record_header(recorded, text, kind, value, redacted) < 0)
            goto done;
        int on;
        if (kind & K_HOP) {
            on = 0;
        } else if (request && (kind & K_CORR)) {
            PyObject *id = PyUnicode_DecodeLatin1(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), NULL);
            if (id == NULL || PyList_Append(ids, id) < 0) {
                Py_XDECREF(id);
                goto done;
            }
            Py_DECREF(id);
            on = keep_ids;
        } else {
            on = !(request && (kind & K_LENGTH));
        }
        if (on && PyList_Append(forwarded, item) < 0)
            goto done;
    }
    out = request ? PyTuple_Pack(3, recorded, forwarded, ids)
                  : PyTuple_Pack(2, recorded, forwarded);
done:
    Py_XDECREF(recorded);
    Py_XDECREF(forwarded);
    Py_XDECREF(ids);
    return out;
}

static PyObject *request_heads(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "request_heads() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    int keep = PyObject_IsTrue(args[2]);
    if (keep < 0)
        return NULL;
    return heads(args[0], args[1], 1, keep, args[3]);
}

static PyObject *response_heads(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "response_heads() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    return heads(args[0], args[1], 0, 0, args[2]);
}

static PyMethodDef methods[] = {
    {"request_lines", request_lines, METH_O,
     "Each (name, value) of a list of pairs of bytes as b'name: value\\r\\n', joined; None for "
     "any other shape."},
    {"response_lines", response_lines, METH_O,
     "The same with names in lower case, or None where the Python path decides (a character it "
     "refuses, a header of the framing, another shape)."},
    {"parse_request", (PyCFunction)(void (*)(void))parse_request, METH_FASTCALL,
     "parse_request(data, max_head): (method, path, query, version, headers, keep_alive, body) "
     "for one whole request of the common shape in ``data``, else None (httptools decides)."},
    {"parse_response", (PyCFunction)(void (*)(void))parse_response, METH_FASTCALL,
     "parse_response(data, max_head): (status, headers, close, head_len) for a whole head of the "
     "common chunked shape at the start of ``data``, else None (llhttp decides)."},
    {"request_heads", (PyCFunction)(void (*)(void))request_heads, METH_FASTCALL,
     "request_heads(known, headers, keep_ids, redacted): HeaderNames.request's parts, or None."},
    {"response_heads", (PyCFunction)(void (*)(void))response_heads, METH_FASTCALL,
     "response_heads(known, headers, redacted): HeaderNames.response's parts, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_heads_c", "The compiled twin of a message head's header lines.", -1, methods,
};

PyMODINIT_FUNC PyInit__heads_c(void) {
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL)
        return NULL;
    for (size_t i = 0; i < NMETHODS; i++)
        if (method_names[i] == NULL && (method_names[i] = PyUnicode_InternFromString(METHODS[i])) == NULL)
            goto fail;
    if ((version_11 == NULL && (version_11 = PyUnicode_InternFromString("1.1")) == NULL) ||
        (version_10 == NULL && (version_10 = PyUnicode_InternFromString("1.0")) == NULL) ||
        (empty_bytes == NULL && (empty_bytes = PyBytes_FromStringAndSize(NULL, 0)) == NULL))
        goto fail;
    return mod;
fail:
    Py_DECREF(mod);
    return NULL;
}
