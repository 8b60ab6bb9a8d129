/* The compiled twin of a relayed response body's per-read path (proxy/_upstream.py's
 * _Conn.data_received with llhttp, proxy/_app.py's _DirectSink.forward, proxy/_http.py's
 * DirectBody.send). The Python stays the reference: tests/proxy/test_relay_c.py holds this to it.
 *
 * Three types:
 *   Sink       what the record keeps of a read's pieces and their one write to the caller (a chunk
 *              of the caller's chunked response), with the added-latency observation: the work of
 *              _DirectSink.forward and DirectBody.send, callable with a batch as that is. Given the
 *              caller's socket (`fd`), it writes there itself while the transport holds nothing
 *              unsent, and hands the transport only what the socket did not take.
 *   Dechunker  the upstream's chunked framing after the head, for reads that lie inside the body:
 *              a strict subset of what llhttp accepts (hex size, CRLF, data, CRLF). Its pieces go
 *              to a Sink in the same call. Anything else (an extension, a trailer, a bad byte, a
 *              size line past 15 digits, the last chunk and what follows it) is handed back to the
 *              llhttp parser, which the Dechunker took over at a chunk boundary: it returns the
 *              bytes that bring that parser to the state the Dechunker was in ("the primer") and
 *              where in the read to go on, so llhttp judges every unusual byte as it always did.
 *   Reader     the upstream connection's read callback, a base of its class (_ConnReader): a read
 *              of the body while a Dechunker has it goes to that Dechunker and its Sink without a
 *              Python frame; every other read goes on to the connection's Python methods.
 *
 * The GIL is held throughout; no state outside the objects but interned names and a test's clock
 * for the Readers (use_clock). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* a write to the socket of a caller that went away must fail with EPIPE, not raise SIGPIPE: where
 * sendmsg cannot be told so, the sink never writes there itself */
#ifdef MSG_NOSIGNAL
#define DIRECT_WRITES 1
#else
#define DIRECT_WRITES 0
#define MSG_NOSIGNAL 0
#endif

static PyObject *s_write, *s_is_closing, *s_write_paused, *s_counts, *s_sums, *s_observe, *s_bounds,
    *s_get_write_buffer_size;

/* time.monotonic(), to the same float: CPython reads CLOCK_MONOTONIC in nanoseconds and divides
 * (Python/pytime.c, _PyTime_AsSecondsDouble) */
static double monotonic_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    if (ns % 1000000000 == 0)
        return (double)(ns / 1000000000);
    return (double)ns / 1e9;
}

/* one piece of a batch: its bytes (a span of a read, or a bytes object of the batch) and the stamp
 * of the read it came in */
typedef struct {
    const char *buf;
    Py_ssize_t len;
    double stamp;
} Piece;

/* ---------------------------------------------------------------------------------------------- */
/* Sink */

typedef struct {
    PyObject_HEAD
    /* the record, as a store row keeps a streamed response (contracts' JoinedResponse): the kept
     * bytes joined, and each kept piece's size and arrival offset (ms since t0). A Chunk, its float
     * and its bytes for every forwarded event were three objects made on the request path and read
     * and freed again by the store writer, each out of the cache by then at 256 streams */
    char *rec;
    Py_ssize_t rec_len, rec_cap;
    Py_ssize_t *sizes;
    double *times;
    Py_ssize_t npieces, pieces_cap;
    double t0;           /* the exchange's start, monotonic */
    Py_ssize_t limit;    /* the record limit: bytes past it are forwarded, not kept */
    Py_ssize_t size;     /* bytes forwarded, recorded or not */
    Py_ssize_t calls;    /* reads handed to it (as DirectBody.send's calls: counted by tests) */
    PyObject *added;     /* the added-latency series (proxy/_histogram.py's _Series), or any
                            object with observe(seconds) */
    double *bounds;      /* the series' bucket bounds, copied (NULL: call added.observe) */
    Py_ssize_t nbounds;
    /* the series' buckets and sum, where it keeps them as _Series does (arrays of nbounds + 1
     * int64 and of one double): held, and added to in place. A new int and a new float an event,
     * and the lookups of both, were about a sixth of the sink's own work a read */
    Py_buffer counts_buf, sums_buf;
    char counted;        /* both buffers are held */
    PyObject *conn;      /* the caller's connection (proxy/_http.py's HttpConnection): its
                            write_paused says whether its transport takes more */
    PyObject *transport; /* the caller's transport. Its methods are called by name: bound once per
                            sink they measured no cheaper (docs/proxy.md) */
    PyObject *on_end;    /* called once the body's end (the chunked terminator) is written with the
                            last read (`end`): DirectBody.ended, or None */
    char ended;          /* that end was written */
    /* the caller's socket, written to here rather than through transport.write (-1: never). Only
     * while the transport is not closing (asked before every write: until then the descriptor is
     * open and the transport's own, never one a later connection was given) and holds nothing
     * unsent (`deferred` clear: what it holds goes first). transport.write cost about 1.5k
     * instructions a read in uvloop (its checks, buffer and try-write), a bytes object made for it
     * and copied, for the one sendmsg it ends in */
    int fd;
    char deferred;       /* the transport may hold bytes not yet sent: ask it before writing here */
    Py_ssize_t direct;   /* writes the socket took whole */
} SinkObject;

static int sink_traverse(SinkObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->added);
    Py_VISIT(self->conn);
    Py_VISIT(self->transport);
    Py_VISIT(self->on_end);
    return 0;
}

static void sink_release(SinkObject *self) {
    if (self->counted) {
        self->counted = 0;
        PyBuffer_Release(&self->counts_buf);
        PyBuffer_Release(&self->sums_buf);
    }
}

static int sink_clear(SinkObject *self) {
    sink_release(self);
    Py_CLEAR(self->added);
    Py_CLEAR(self->conn);
    Py_CLEAR(self->transport);
    Py_CLEAR(self->on_end);
    return 0;
}

static void sink_dealloc(SinkObject *self) {
    PyObject_GC_UnTrack(self);
    sink_clear(self);
    PyMem_Free(self->bounds);
    PyMem_Free(self->rec);
    PyMem_Free(self->sizes);
    PyMem_Free(self->times);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* the record grown by one piece of `len` bytes arrived at `t_ms`: 0, or -1 with MemoryError */
static int sink_keep(SinkObject *self, const char *buf, Py_ssize_t len, double t_ms) {
    if (self->npieces == self->pieces_cap) {
        Py_ssize_t cap = self->pieces_cap ? self->pieces_cap * 2 : 32;
        if (cap > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(double)) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t *sizes = PyMem_Realloc(self->sizes, sizeof(Py_ssize_t) * (size_t)cap);
        if (sizes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->sizes = sizes;
        double *times = PyMem_Realloc(self->times, sizeof(double) * (size_t)cap);
        if (times == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->times = times;
        self->pieces_cap = cap;
    }
    if (len > self->rec_cap - self->rec_len) {
        if (len > PY_SSIZE_T_MAX / 2 - self->rec_len) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t cap = self->rec_cap ? self->rec_cap : 4096;
        while (cap < self->rec_len + len)
            cap *= 2;
        char *rec = PyMem_Realloc(self->rec, (size_t)cap);
        if (rec == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->rec = rec;
        self->rec_cap = cap;
    }
    if (len)
        memcpy(self->rec + self->rec_len, buf, (size_t)len);
    self->rec_len += len;
    self->sizes[self->npieces] = len;
    self->times[self->npieces] = t_ms;
    self->npieces++;
    return 0;
}

/* sink.joined(): (the kept bytes joined, each piece's size, each piece's arrival offset in ms), the
 * record so far, as contracts' JoinedResponse holds it */
static PyObject *sink_joined(SinkObject *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *data = PyBytes_FromStringAndSize(self->rec_len ? self->rec : "", self->rec_len);
    PyObject *sizes = PyList_New(self->npieces), *times = PyList_New(self->npieces);
    if (data == NULL || sizes == NULL || times == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < self->npieces; i++) {
        PyObject *n = PyLong_FromSsize_t(self->sizes[i]);
        if (n == NULL)
            goto fail;
        PyList_SET_ITEM(sizes, i, n);
        PyObject *t = PyFloat_FromDouble(self->times[i]);
        if (t == NULL)
            goto fail;
        PyList_SET_ITEM(times, i, t);
    }
    return Py_BuildValue("(NNN)", data, sizes, times);
fail:
    Py_XDECREF(data);
    Py_XDECREF(sizes);
    Py_XDECREF(times);
    return NULL;
}

/* one-dimensional, contiguous and writable, of `count` items of `format` ("q", "d"): 1, else 0 */
static int buffer_of(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize,
                     Py_ssize_t count) {
    if (obj == NULL || !PyObject_CheckBuffer(obj)) {
        PyErr_Clear();
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->ndim == 1 && view->itemsize == itemsize && view->format != NULL &&
        strcmp(view->format, format) == 0 && view->len == itemsize * count)
        return 1;
    PyBuffer_Release(view);
    return 0;
}

/* hold the series' `counts` (nbounds + 1 int64) and `sums` (one double) where it has them so:
 * self->counted says whether it does */
static void sink_hold(SinkObject *self) {
    PyObject *counts = PyObject_GetAttr(self->added, s_counts);
    PyObject *sums = counts == NULL ? NULL : PyObject_GetAttr(self->added, s_sums);
    PyErr_Clear();
    if (buffer_of(counts, &self->counts_buf, "q", (Py_ssize_t)sizeof(int64_t), self->nbounds + 1)) {
        if (buffer_of(sums, &self->sums_buf, "d", (Py_ssize_t)sizeof(double), 1))
            self->counted = 1;
        else
            PyBuffer_Release(&self->counts_buf);
    }
    Py_XDECREF(counts);
    Py_XDECREF(sums);
}

static PyObject *sink_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"t0", "limit", "added", "conn", "transport", "on_end", "fd", NULL};
    PyObject *added, *conn, *transport, *on_end = Py_None;
    double t0;
    Py_ssize_t limit;
    int fd = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "dnOOO|Oi:Sink", kwlist, &t0, &limit, &added, &conn,
                                     &transport, &on_end, &fd))
        return NULL;
    if (on_end != Py_None && !PyCallable_Check(on_end)) {
        PyErr_SetString(PyExc_TypeError, "Sink: on_end is a callable or None");
        return NULL;
    }
    SinkObject *self = (SinkObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->rec = NULL;
    self->rec_len = self->rec_cap = 0;
    self->sizes = NULL;
    self->times = NULL;
    self->npieces = self->pieces_cap = 0;
    self->t0 = t0;
    self->limit = limit;
    self->size = 0;
    self->calls = 0;
    self->added = Py_NewRef(added);
    self->conn = Py_NewRef(conn);
    self->transport = Py_NewRef(transport);
    self->on_end = Py_NewRef(on_end);
    self->ended = 0;
    self->fd = DIRECT_WRITES && fd >= 0 ? fd : -1;
    self->deferred = 1; /* the head went through the transport: asked once before the first write */
    self->direct = 0;
    self->bounds = NULL;
    self->nbounds = 0;
    self->counted = 0;
    /* a series with float bounds and its buckets and sum in arrays is observed here, as
     * _Series.observe does; anything else through its observe method */
    PyObject *bounds = PyObject_GetAttr(added, s_bounds);
    if (bounds == NULL) {
        PyErr_Clear();
        return (PyObject *)self;
    }
    if (PyTuple_CheckExact(bounds)) {
        Py_ssize_t n = PyTuple_GET_SIZE(bounds);
        int ok = 1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!PyFloat_CheckExact(PyTuple_GET_ITEM(bounds, i)))
                ok = 0;
        if (ok) {
            self->bounds = PyMem_Malloc(sizeof(double) * (n ? n : 1));
            if (self->bounds == NULL) {
                Py_DECREF(bounds);
                Py_DECREF(self);
                return PyErr_NoMemory();
            }
            for (Py_ssize_t i = 0; i < n; i++)
                self->bounds[i] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(bounds, i));
            self->nbounds = n;
        }
    }
    Py_DECREF(bounds);
    if (self->bounds != NULL)
        sink_hold(self);
    if (!self->counted) { /* not kept as _Series keeps them: observe() */
        PyMem_Free(self->bounds);
        self->bounds = NULL;
    }
    return (PyObject *)self;
}

/* _Series.observe: counts[bisect_left(bounds, value)] += 1; sums[0] += value */
static int sink_observe(SinkObject *self, double value) {
    if (!self->counted) {
        PyObject *v = PyFloat_FromDouble(value);
        if (v == NULL)
            return -1;
        PyObject *r = PyObject_CallMethodOneArg(self->added, s_observe, v);
        Py_DECREF(v);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        return 0;
    }
    Py_ssize_t lo = 0, hi = self->nbounds;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (self->bounds[mid] < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    ((int64_t *)self->counts_buf.buf)[lo] += 1;
    ((double *)self->sums_buf.buf)[0] += value;
    return 0;
}

/* DirectBody.send's test: 1 the caller is there, 0 gone (its transport is closing: the loss of its
 * connection closes it before the cycle is marked disconnected, and so does a cut), -1 error. Asked
 * of the transport alone, which the write touches anyway: the request cycle, held weakly and read
 * for its disconnected flag, was two more objects to reach on every read (about 1 % of the
 * forwarding process at 256 streams, each of them out of the cache by the stream's next event) */
static int sink_caller(SinkObject *self) {
    PyObject *closing = PyObject_CallMethodNoArgs(self->transport, s_is_closing);
    int t = closing == NULL ? -1 : PyObject_IsTrue(closing);
    Py_XDECREF(closing);
    return t < 0 ? -1 : !t;
}

/* the hex size line of a chunk of n bytes, as b"%x\r\n" % n writes it; returns its length */
static int size_line(char *out, size_t n) {
    char tmp[2 * sizeof(size_t)];
    int k = 0;
    do {
        tmp[k++] = "0123456789abcdef"[n & 15];
        n >>= 4;
    } while (n);
    for (int i = 0; i < k; i++)
        out[i] = tmp[k - 1 - i];
    out[k] = '\r';
    out[k + 1] = '\n';
    return k + 2;
}

/* the chunked body's end, as the ASGI send of the body's last message writes it */
static const char TERMINATOR[] = "0\r\n\r\n";
#define TERMINATOR_LEN 5

/* the most pieces a write to the socket gathers from where they lie (more are copied together) */
#define DIRECT_IOV 64

/* whether the sink may write to the caller's socket itself now: it has the socket, and the
 * transport holds nothing unsent (asked only after the transport was last given bytes). A transport
 * that cannot say so (or fails to) is written through from then on */
static int sink_may_write(SinkObject *self) {
    if (self->fd < 0)
        return 0;
    if (!self->deferred)
        return 1;
    PyObject *size = PyObject_CallMethodNoArgs(self->transport, s_get_write_buffer_size);
    Py_ssize_t held = size == NULL ? -1 : PyLong_AsSsize_t(size);
    Py_XDECREF(size);
    if (held < 0) {
        PyErr_Clear();
        self->fd = -1;
        return 0;
    }
    if (held > 0)
        return 0;
    self->deferred = 0;
    return 1;
}

/* bytes [skip, want) of the write of `want` bytes: the size line, the pieces and CRLF (with
 * `total`), then the body's end (with `last`) */
static PyObject *sink_bytes(const char *line, int ln, const Piece *pieces, Py_ssize_t n, Py_ssize_t total,
                            int last, Py_ssize_t want, Py_ssize_t skip) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, want - skip);
    if (out == NULL)
        return NULL;
    char *p = PyBytes_AS_STRING(out);
    Py_ssize_t at = 0; /* of the whole write: what has been passed over or copied */
#define PUT(src, len)                                                                                  \
    do {                                                                                               \
        Py_ssize_t l_ = (len), from_ = skip > at ? skip - at : 0;                                      \
        if (from_ < l_) {                                                                              \
            memcpy(p, (src) + from_, l_ - from_);                                                      \
            p += l_ - from_;                                                                           \
        }                                                                                              \
        at += l_;                                                                                      \
    } while (0)
    if (total) {
        PUT(line, ln);
        for (Py_ssize_t i = 0; i < n; i++)
            PUT(pieces[i].buf, pieces[i].len);
        PUT("\r\n", 2);
    }
    if (last)
        PUT(TERMINATOR, TERMINATOR_LEN);
#undef PUT
    return out;
}

/* one write to the caller: the chunk of these pieces (with `total` bytes), then with `last` the body's
 * end. To its socket where sink_may_write says so, in one sendmsg from where the pieces lie; what the
 * socket did not take (all of it, on an error: the transport meets the same error and handles it as
 * it would have) goes to transport.write, after which the transport is asked before the next write
 * here. 0, or -1 with an exception */
static int sink_send(SinkObject *self, const Piece *pieces, Py_ssize_t n, Py_ssize_t total, int last) {
    char line[2 * sizeof(size_t) + 2];
    int ln = total ? size_line(line, (size_t)total) : 0;
    Py_ssize_t want = (total ? ln + total + 2 : 0) + (last ? TERMINATOR_LEN : 0);
    Py_ssize_t sent = 0;
    if (n + 3 <= DIRECT_IOV && sink_may_write(self)) {
        struct iovec iov[DIRECT_IOV];
        int k = 0;
        if (total) {
            iov[k].iov_base = line;
            iov[k++].iov_len = (size_t)ln;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (pieces[i].len == 0)
                    continue;
                iov[k].iov_base = (void *)pieces[i].buf;
                iov[k++].iov_len = (size_t)pieces[i].len;
            }
            iov[k].iov_base = (void *)"\r\n";
            iov[k++].iov_len = 2;
        }
        if (last) {
            iov[k].iov_base = (void *)TERMINATOR;
            iov[k++].iov_len = TERMINATOR_LEN;
        }
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)k;
        ssize_t w;
        do {
            w = sendmsg(self->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (w < 0 && errno == EINTR);
        if (w == want) {
            self->direct++;
            return 0;
        }
        sent = w > 0 ? (Py_ssize_t)w : 0;
    }
    PyObject *out = sink_bytes(line, ln, pieces, n, total, last, want, sent);
    if (out == NULL)
        return -1;
    self->deferred = 1; /* the transport may keep some of it: asked before the next write here */
    PyObject *r = PyObject_CallMethodOneArg(self->transport, s_write, out);
    Py_DECREF(out);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* _DirectSink.forward for pieces already parsed: written to the caller as one chunk, recorded, the
 * oldest piece's wait observed. With `last` (_DirectSink.end) the body's end follows the chunk in
 * the same write, and on_end is called. 1: the caller takes more; 0: stop (its buffer is full, or it
 * is gone: then nothing was written or recorded); -1: error */
static int sink_relay(SinkObject *self, const Piece *pieces, Py_ssize_t n, int last) {
    self->calls++;
    int there = sink_caller(self);
    if (there <= 0)
        return there;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (pieces[i].len > PY_SSIZE_T_MAX - 32 - total) {
            PyErr_NoMemory();
            return -1;
        }
        total += pieces[i].len;
    }
    if (total || last) {
        if (sink_send(self, pieces, n, total, last) < 0)
            return -1;
        if (last) {
            self->ended = 1;
            if (self->on_end != Py_None) {
                PyObject *e = PyObject_CallNoArgs(self->on_end);
                if (e == NULL)
                    return -1;
                Py_DECREF(e);
            }
        }
    }
    /* the caller's connection's write_paused, read after the write (which may have set it) */
    PyObject *wp = PyObject_GetAttr(self->conn, s_write_paused);
    int paused = wp == NULL ? -1 : PyObject_IsTrue(wp);
    Py_XDECREF(wp);
    if (paused < 0)
        return -1;
    int more = !paused;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t size = self->size, len = pieces[i].len;
        self->size = size + len;
        if (size >= self->limit)
            continue;
        if (sink_keep(self, pieces[i].buf, size + len <= self->limit ? len : self->limit - size,
                      (pieces[i].stamp - self->t0) * 1000.0) < 0)
            return -1;
    }
    if (n > 0 && sink_observe(self, monotonic_now() - pieces[0].stamp) < 0)
        return -1;
    return more;
}

/* sink(batch) and sink.end(batch): _DirectSink.forward's and _DirectSink.end's contract (a list of
 * (stamp, bytes)) */
static PyObject *sink_batch(SinkObject *self, PyObject *batch, int last) {
    if (!PyList_Check(batch)) {
        PyErr_SetString(PyExc_TypeError, "a batch is a list of (stamp, bytes) pairs");
        return NULL;
    }
    /* the batch's items held in a list of our own while they are read and written: the write, and
     * a collection at any allocation (a finalizer), may run Python code that changes the batch */
    PyObject *items = PyList_GetSlice(batch, 0, PY_SSIZE_T_MAX);
    if (items == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    Piece one, *pieces = n <= 1 ? &one : PyMem_Malloc(sizeof(Piece) * n);
    if (pieces == NULL) {
        Py_DECREF(items);
        return PyErr_NoMemory();
    }
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(item, 1))) {
            PyErr_SetString(PyExc_TypeError, "a batch holds (stamp, bytes) pairs");
            rc = -1;
            break;
        }
        PyObject *data = PyTuple_GET_ITEM(item, 1);
        pieces[i].stamp = PyFloat_AsDouble(PyTuple_GET_ITEM(item, 0));
        if (pieces[i].stamp == -1.0 && PyErr_Occurred()) {
            rc = -1;
            break;
        }
        pieces[i].buf = PyBytes_AS_STRING(data);
        pieces[i].len = PyBytes_GET_SIZE(data);
    }
    if (rc == 0)
        rc = sink_relay(self, pieces, n, last);
    Py_DECREF(items);
    if (pieces != &one)
        PyMem_Free(pieces);
    if (rc < 0)
        return NULL;
    return PyBool_FromLong(rc);
}

static PyObject *sink_call(SinkObject *self, PyObject *args, PyObject *kwds) {
    PyObject *batch;
    if (!PyArg_ParseTuple(args, "O!:Sink", &PyList_Type, &batch))
        return NULL;
    return sink_batch(self, batch, 0);
}

/* sink.end(batch): the last read of a complete body, with the body's end in the same write */
static PyObject *sink_end(SinkObject *self, PyObject *batch) { return sink_batch(self, batch, 1); }

static PyMemberDef sink_members[] = {
    {"size", T_PYSSIZET, offsetof(SinkObject, size), READONLY, "bytes forwarded, recorded or not"},
    {"ended", T_BOOL, offsetof(SinkObject, ended), READONLY, "the body's end was written (end)"},
    {"calls", T_PYSSIZET, offsetof(SinkObject, calls), READONLY, "reads handed to it"},
    {"direct", T_PYSSIZET, offsetof(SinkObject, direct), READONLY,
     "writes the caller's socket took whole from the sink itself"},
    {NULL},
};

static PyMethodDef sink_methods[] = {
    {"joined", (PyCFunction)sink_joined, METH_NOARGS,
     "The record so far: (the kept bytes joined, each piece's size, each piece's t_ms)."},
    {"end", (PyCFunction)sink_end, METH_O,
     "end(batch): the last read of a complete body, written with the body's end (then on_end())."},
    {NULL},
};

static PyTypeObject SinkType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "wirecheck.proxy._relay_c.Sink",
    .tp_basicsize = sizeof(SinkObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A relayed body's record and its writes to the caller (_DirectSink.forward's twin).",
    .tp_new = sink_new,
    .tp_dealloc = (destructor)sink_dealloc,
    .tp_traverse = (traverseproc)sink_traverse,
    .tp_clear = (inquiry)sink_clear,
    .tp_call = (ternaryfunc)sink_call,
    .tp_members = sink_members,
    .tp_methods = sink_methods,
};

/* ---------------------------------------------------------------------------------------------- */
/* Dechunker */

/* where in the framing the next byte falls */
enum {
    D_SIZE,     /* a size line's hex digits (none yet, or some) */
    D_SIZE_LF,  /* its CR seen */
    D_DATA,     /* inside a chunk's data */
    D_DATA_CR,  /* after the data: its CR */
    D_DATA_LF,  /* its LF */
};

/* the longest size line handled here: 15 hex digits (2**60); a longer one is llhttp's to judge
 * (it refuses sizes past 64 bits) */
#define MAX_DIGITS 15

typedef struct {
    PyObject_HEAD
    int state;
    int ndigits;
    char digits[MAX_DIGITS];
    uint64_t left; /* of the chunk being read (D_DATA) */
} DechunkerObject;

static PyObject *dechunker_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (!PyArg_ParseTuple(args, ":Dechunker"))
        return NULL;
    DechunkerObject *self = (DechunkerObject *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->state = D_SIZE;
        self->ndigits = 0;
        self->left = 0;
    }
    return (PyObject *)self;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* appends the read's pieces to `pieces` as (stamp, bytes) pairs, as _Conn.on_body does */
static int append_pieces(PyObject *list, const Piece *pieces, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = Py_BuildValue("(dy#)", pieces[i].stamp, pieces[i].buf, pieces[i].len);
        if (pair == NULL)
            return -1;
        int rc = PyList_Append(list, pair);
        Py_DECREF(pair);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* dechunker.feed(data, stamp, sink, pieces): one read of the body (a method called through
 * vectorcall: no argument tuple or format to parse on each read).
 *   True / False   the read lay inside the body and its pieces went to `sink` (a Sink, and
 *                  `pieces` was empty): False when the sink said stop
 *   an int         the read lay inside the body; its pieces were appended to `pieces`: their
 *                  bytes (what _Conn.on_body adds to `buffered` while nothing relays)
 *   (primer, offset, filler, appended)
 *                  hand the rest to llhttp: this read's pieces before `offset` were appended to
 *                  `pieces` (`appended` bytes of them); feed the parser primer + data[offset:]. With `filler` the primer
 *                  holds one byte of chunk data that only puts llhttp after a chunk's data: the
 *                  first piece that feed gives is to be dropped. The dechunker is done. */
/* feed's work: `data` bytes and `list` a list, each held by the caller throughout (as are `sink`) */
static PyObject *dechunk_read(DechunkerObject *self, PyObject *data, double stamp, PyObject *sink,
                              PyObject *list) {
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t len = PyBytes_GET_SIZE(data), i = 0;
    /* most reads hold a piece or two: room for 16 on the stack, more made as needed */
    Piece stack[16], *pieces = stack;
    Py_ssize_t cap = 16, n = 0;
    PyObject *result = NULL, *primer = NULL;
    Py_ssize_t offset = -1;
    int filler = 0;
    while (i < len && offset < 0) {
        unsigned char c = p[i];
        switch (self->state) {
        case D_SIZE: {
            int v = hexval(c);
            if (v >= 0 && self->ndigits < MAX_DIGITS) {
                self->digits[self->ndigits++] = (char)c;
                self->left = (self->left << 4) | (uint64_t)v;
                i++;
            } else if (c == '\r' && self->ndigits > 0) {
                self->state = D_SIZE_LF;
                i++;
            } else {
                /* an extension, white space, a bad byte, too many digits: llhttp's */
                primer = PyBytes_FromStringAndSize(self->digits, self->ndigits);
                offset = i;
            }
            break;
        }
        case D_SIZE_LF:
            if (c != '\n' || self->left == 0) {
                /* a bad line end, or the last chunk (trailers, the message's end and what may
                 * follow it are llhttp's, and _Conn's callbacks') */
                char buf[MAX_DIGITS + 1];
                memcpy(buf, self->digits, self->ndigits);
                buf[self->ndigits] = '\r';
                primer = PyBytes_FromStringAndSize(buf, self->ndigits + 1);
                offset = i;
                break;
            }
            self->state = D_DATA;
            self->ndigits = 0;
            i++;
            break;
        case D_DATA: {
            if (n == cap) {
                Piece *more = PyMem_Malloc(sizeof(Piece) * cap * 2);
                if (more == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                memcpy(more, pieces, sizeof(Piece) * n);
                if (pieces != stack)
                    PyMem_Free(pieces);
                pieces = more;
                cap *= 2;
            }
            Py_ssize_t take = len - i;
            if ((uint64_t)take > self->left)
                take = (Py_ssize_t)self->left;
            pieces[n].buf = (const char *)p + i;
            pieces[n].len = take;
            pieces[n].stamp = stamp;
            n++;
            i += take;
            self->left -= (uint64_t)take;
            if (self->left == 0)
                self->state = D_DATA_CR;
            break;
        }
        case D_DATA_CR:
            if (c != '\r') {
                primer = PyBytes_FromStringAndSize("1\r\nx", 4);
                offset = i;
                filler = 1;
                break;
            }
            self->state = D_DATA_LF;
            i++;
            break;
        case D_DATA_LF:
            if (c != '\n') {
                primer = PyBytes_FromStringAndSize("1\r\nx\r", 5);
                offset = i;
                filler = 1;
                break;
            }
            self->state = D_SIZE;
            self->left = 0;
            i++;
            break;
        }
    }
    Py_ssize_t bytes = 0;
    for (Py_ssize_t k = 0; k < n; k++)
        bytes += pieces[k].len;
    if (offset >= 0) {
        if (primer == NULL || append_pieces(list, pieces, n) < 0)
            goto done;
        result = Py_BuildValue("(OnOn)", primer, offset, filler ? Py_True : Py_False, bytes);
    } else if (Py_IS_TYPE(sink, &SinkType) && PyList_GET_SIZE(list) == 0) {
        int rc = n ? sink_relay((SinkObject *)sink, pieces, n, 0) : 1;
        if (rc >= 0)
            result = PyBool_FromLong(rc);
    } else if (append_pieces(list, pieces, n) == 0) {
        result = PyLong_FromSsize_t(bytes);
    }
done:
    Py_XDECREF(primer);
    if (pieces != stack)
        PyMem_Free(pieces);
    return result;
}

static PyObject *dechunker_feed(DechunkerObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyBytes_Check(args[0]) || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "feed(data: bytes, stamp: float, sink, pieces: list)");
        return NULL;
    }
    double stamp = PyFloat_AsDouble(args[1]);
    if (stamp == -1.0 && PyErr_Occurred())
        return NULL;
    /* the caller's references (the call's arguments) hold data, sink and list throughout */
    return dechunk_read(self, args[0], stamp, args[2], args[3]);
}

static PyMethodDef dechunker_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))dechunker_feed, METH_FASTCALL,
     "feed(data, stamp, sink, pieces): one read of the body (see the module's source)"},
    {NULL},
};

static PyTypeObject DechunkerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "wirecheck.proxy._relay_c.Dechunker",
    .tp_basicsize = sizeof(DechunkerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A chunked body's reads inside the body, taken over from llhttp at a chunk boundary.",
    .tp_new = dechunker_new,
    .tp_methods = dechunker_methods,
};

/* ---------------------------------------------------------------------------------------------- */
/* Reader: the upstream connection's read callback (proxy/_upstream.py's _ConnReader derives from
 * it, after _ConnC). _Conn.data_received is the reference: a read of the body while a Dechunker has
 * it (`dechunk`) is fed to it here, stamped with the clock as time.monotonic() reads it, and when
 * the Dechunker relays it whole (True) nothing more happens but a wake-up of the waiting task for
 * a connection the sink halted (`_wake`). Every other outcome goes on in Python: `_dechunked(data,
 * took)`; a read with no Dechunker, to `_read(data)`. The fields are the connection's attributes
 * of the same names, which its Python code sets and reads as ever. */

typedef struct {
    PyObject_HEAD
    PyObject *dechunk; /* the Dechunker that has the body, or None */
    PyObject *sink;    /* the body's sink while one relays it, or None */
    PyObject *pieces;  /* the list of (stamp, bytes) parsed and not yet relayed */
    double stamp;      /* when the read being parsed arrived */
    char halted;       /* the sink said stop */
} ReaderObject;

static PyObject *s_read, *s_dechunked, *s_wake;
/* the clock a Reader stamps reads with, where a test set one (use_clock); NULL: monotonic_now */
static PyObject *reader_clock;

/* use_clock(clock | None): a test's clock for the Readers' stamps (the same calls as the Python
 * path's time.monotonic() for the same reads), or the real one again */
static PyObject *use_clock(PyObject *module, PyObject *clock) {
    if (clock != Py_None && !PyCallable_Check(clock)) {
        PyErr_SetString(PyExc_TypeError, "use_clock(clock): a callable returning seconds, or None");
        return NULL;
    }
    Py_XSETREF(reader_clock, clock == Py_None ? NULL : Py_NewRef(clock));
    Py_RETURN_NONE;
}

static int reader_traverse(ReaderObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->dechunk);
    Py_VISIT(self->sink);
    Py_VISIT(self->pieces);
    return 0;
}

static int reader_clear(ReaderObject *self) {
    Py_CLEAR(self->dechunk);
    Py_CLEAR(self->sink);
    Py_CLEAR(self->pieces);
    return 0;
}

static void reader_dealloc(ReaderObject *self) {
    PyObject_GC_UnTrack(self);
    reader_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* object.__new__, not PyType_GenericNew: it also lays out a subclass instance's attribute values
 * inline (CPython 3.11+); without that each instance kept a dict, and every attribute access of the
 * connection's Python code took about four times as long (docs/proxy.md), many times an exchange */
static PyObject *reader_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    return PyBaseObject_Type.tp_new(type, args, kwds);
}

static PyObject *reader_data_received(ReaderObject *self, PyObject *data) {
    PyObject *d = self->dechunk;
    if (d == NULL || d == Py_None)
        return PyObject_CallMethodOneArg((PyObject *)self, s_read, data);
    if (!Py_IS_TYPE(d, &DechunkerType) || !PyBytes_Check(data) || self->pieces == NULL ||
        !PyList_Check(self->pieces)) {
        PyErr_SetString(PyExc_TypeError,
                        "Reader.data_received: dechunk is a Dechunker or None, data bytes, pieces a list");
        return NULL;
    }
    double stamp;
    if (reader_clock == NULL) {
        stamp = monotonic_now();
    } else {
        PyObject *t = PyObject_CallNoArgs(reader_clock);
        stamp = t == NULL ? -1.0 : PyFloat_AsDouble(t);
        Py_XDECREF(t);
        if (stamp == -1.0 && PyErr_Occurred())
            return NULL;
    }
    self->stamp = stamp;
    /* held for the call: the sink's write may run Python code that sets any of them anew */
    PyObject *sink = Py_NewRef(self->sink != NULL ? self->sink : Py_None);
    PyObject *pieces = Py_NewRef(self->pieces);
    Py_INCREF(d);
    PyObject *took = dechunk_read((DechunkerObject *)d, data, stamp, sink, pieces);
    Py_DECREF(d);
    Py_DECREF(sink);
    Py_DECREF(pieces);
    if (took == NULL)
        return NULL;
    if (took == Py_True) {
        Py_DECREF(took);
        if (self->halted)
            return PyObject_CallMethodNoArgs((PyObject *)self, s_wake);
        Py_RETURN_NONE;
    }
    PyObject *r = PyObject_CallMethodObjArgs((PyObject *)self, s_dechunked, data, took, NULL);
    Py_DECREF(took);
    return r;
}

static PyMethodDef reader_methods[] = {
    {"data_received", (PyCFunction)reader_data_received, METH_O,
     "data_received(data): one read from the upstream (see the module's source)"},
    {NULL},
};

static PyMemberDef reader_members[] = {
    {"dechunk", T_OBJECT_EX, offsetof(ReaderObject, dechunk), 0, "the Dechunker that has the body, or None"},
    {"sink", T_OBJECT_EX, offsetof(ReaderObject, sink), 0, "the body's sink while one relays it, or None"},
    {"pieces", T_OBJECT_EX, offsetof(ReaderObject, pieces), 0, "(stamp, bytes) parsed, not yet relayed"},
    {"stamp", T_DOUBLE, offsetof(ReaderObject, stamp), 0, "when the read being parsed arrived"},
    {"halted", T_BOOL, offsetof(ReaderObject, halted), 0, "the sink said stop"},
    {NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "wirecheck.proxy._relay_c.Reader",
    .tp_basicsize = sizeof(ReaderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "An upstream connection's read callback, for a class that derives from it.",
    .tp_new = reader_new,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_methods = reader_methods,
    .tp_members = reader_members,
};

/* ---------------------------------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"use_clock", (PyCFunction)use_clock, METH_O,
     "use_clock(clock): a test's clock for the Readers' stamps; None: the real one"},
    {NULL},
};

static struct PyModuleDef relay_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "wirecheck.proxy._relay_c",
    .m_methods = module_methods,
    .m_doc = "The compiled twin of a relayed response body's per-read path.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__relay_c(void) {
#define INTERN(var, text)                                                                              \
    if ((var = PyUnicode_InternFromString(text)) == NULL)                                                \
        return NULL;
    INTERN(s_write, "write");
    INTERN(s_is_closing, "is_closing");
    INTERN(s_write_paused, "write_paused");
    INTERN(s_counts, "counts");
    INTERN(s_sums, "sums");
    INTERN(s_observe, "observe");
    INTERN(s_bounds, "bounds");
    INTERN(s_get_write_buffer_size, "get_write_buffer_size");
    INTERN(s_read, "_read");
    INTERN(s_dechunked, "_dechunked");
    INTERN(s_wake, "_wake");
#undef INTERN
    if (PyType_Ready(&SinkType) < 0 || PyType_Ready(&DechunkerType) < 0 || PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&relay_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Sink", (PyObject *)&SinkType) < 0 ||
        PyModule_AddObjectRef(m, "Dechunker", (PyObject *)&DechunkerType) < 0 ||
        PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
