/* neuron_prof.loaders.json._jscan: one pass over a piece of a Chrome/Kineto `traceEvents` array in C.
 *
 *     scan(buf, lo, hi) -> tuple | int
 *
 * buf[lo:hi] holds array elements ("{...}, {...}, ..."). Every element must be an X, flow (s/t/f) or
 * instant (i/I/R) event whose kept fields have the types the msgspec path accepts (neuron_prof/loaders/
 * _json_typed.py); then the result is the columns the model stores, as bytes (see _json_scan.py, which
 * turns them into arrays and keeps all the Python-side rules). Otherwise it returns 2 (another phase: the
 * orjson path reads the piece) or 1 (anything else: the msgspec path, then orjson, with their repairs).
 * The scan itself runs without the GIL. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_jscan_json.h"

enum { F_PH, F_TS, F_DUR, F_PID, F_TID, F_NAME, F_CAT, F_ARGS, F_ID, F_ID2, F_BP, F_NP_SLICE, F_BIND_ID,
       F_FLOW_IN, F_FLOW_OUT, F_OTHER };
enum { K_NONE = 0, K_INT = 1, K_STR = 2 };  /* kinds of pid/tid/id values */

typedef struct {
    Cur c;
    StrTab strs;
    KeyTab pairs, fkeys;
    int64_t last_pk[KEYW];  /* the (pid, tid) of the event before and its id (consecutive events share it) */
    int32_t last_tr;
    Buf ph, ts, dur, track, name, cat, has, alen, fkey, bp, hint, blob, redo, sparse;
    Buf gblob[2];   /* args of flows (kept only to be checked) and of instants; X args are in blob */
    Buf order[3][4];  /* per group (X, flows, instants): local track, name, cat, flow key ids in order of first use */
    int64_t n;
} Scan;

static int group_of(int ph) { return ph == 0 ? 0 : ph <= 3 ? 1 : 2; }

static int field_of(const uint8_t *k, size_t n) {
#define IS(s) (n == sizeof(s) - 1 && !memcmp(k, s, n))
    switch (n) {
    case 2: return IS("ph") ? F_PH : IS("ts") ? F_TS : IS("id") ? F_ID : IS("bp") ? F_BP : F_OTHER;
    case 3: return IS("dur") ? F_DUR : IS("pid") ? F_PID : IS("tid") ? F_TID : IS("cat") ? F_CAT
                   : IS("id2") ? F_ID2 : F_OTHER;
    case 4: return IS("name") ? F_NAME : IS("args") ? F_ARGS : F_OTHER;
    case 7: return IS("bind_id") ? F_BIND_ID : IS("flow_in") ? F_FLOW_IN : F_OTHER;
    case 8: return IS("np_slice") ? F_NP_SLICE : IS("flow_out") ? F_FLOW_OUT : F_OTHER;
    default: return F_OTHER;
    }
#undef IS
}

static int ph_code(const uint8_t *s, size_t n) {
    if (n != 1) return -1;
    switch (s[0]) {
    case 'X': return 0; case 's': return 1; case 't': return 2; case 'f': return 3;
    case 'i': return 4; case 'I': return 5; case 'R': return 6;
    default: return -1;
    }
}

/* An int64 or a string (pid, tid, id), as (kind, value): a string's value is its id in the string table. */
static int field_id(Scan *s, int64_t *kind, int64_t *val, int allow_null) {
    Cur *c = &s->c;
    if (c->p >= c->end) return S_BAD;
    if (*c->p == '"') {
        size_t off, len;
        int esc, r;
        if ((r = scan_string(c, &off, &len, &esc))) return r;
        int32_t id = strtab_id(&s->strs, off, len, esc);
        if (id < 0) return S_NOMEM;
        *kind = K_STR;
        *val = id;
        return S_OK;
    }
    if (allow_null && *c->p == 'n') {
        *kind = K_NONE;
        *val = 0;
        return lit(c, "null", 4);
    }
    Num n;
    if (scan_number(c, &n) || num_int64(&n, val)) return S_BAD;
    *kind = K_INT;
    return S_OK;
}

static int field_str(Scan *s, int32_t *id) {
    Cur *c = &s->c;
    size_t off, len;
    int esc, r;
    if (c->p >= c->end || *c->p != '"') return S_BAD;
    if ((r = scan_string(c, &off, &len, &esc))) return r;
    *id = strtab_id(&s->strs, off, len, esc);
    return *id < 0 ? S_NOMEM : S_OK;
}

/* args: an object is copied into the blob without whitespace ({} and null/false/""/[] mean no args);
 * anything else makes the piece go the Python way. The blob has room for the whole piece (scan_all). */
static int field_args(Scan *s, int64_t idx, uint8_t *has, int64_t *alen) {
    Cur *c = &s->c;
    const uint8_t *v0 = c->p;
    int redo = 0, r;
    if (c->p < c->end && *c->p == '{') {
        uint8_t *o0 = s->blob.d + s->blob.n, *o = o0;
        if ((r = copy_value(c, &o, &redo, 1))) return r;
        size_t n = (size_t)(o - o0);
        if (redo) {  /* orjson writes these: the Python side re-serialises the span */
            int64_t rec[3] = {idx, (int64_t)(v0 - c->base), (int64_t)(c->p - c->base)};
            if (buf_put(&s->redo, rec, sizeof(rec))) return S_NOMEM;
            *has = 1;
            *alen = 0;
        } else if (n == 2) {  /* {} */
            *has = 0;
            *alen = 0;
        } else {
            s->blob.n += n;
            *has = 1;
            *alen = (int64_t)n;
        }
        return S_OK;
    }
    if ((r = skip_value(c, 1))) return r;
    const uint8_t *e = c->p;
    if ((e - v0 == 4 && !memcmp(v0, "null", 4)) || (e - v0 == 5 && !memcmp(v0, "false", 5))
        || (e - v0 == 2 && v0[0] == '"')) {
        *has = 0;
        *alen = 0;
        return S_OK;
    }
    if (v0[0] == '[') {  /* [] with any whitespace inside */
        const uint8_t *q = v0 + 1;
        while (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t') q++;
        if (*q == ']') { *has = 0; *alen = 0; return S_OK; }
    }
    return S_BAD;
}

static int scan_event(Scan *s) {
    Cur *c = &s->c;
    int r;
    if (c->p >= c->end || *c->p != '{') return S_BAD;
    c->p++;
    int ph = -1;
    double ts = NAN, dur = NAN;
    int64_t pid[2] = {K_INT, 0}, tid[2] = {K_INT, 0}, fid[2] = {K_NONE, 0}, hint = -1;
    int32_t name = 0, cat = 0;  /* id 0 is "" */
    uint8_t has = 0, bp = 0;
    int64_t alen = 0;
    unsigned seen = 0;
    int64_t idx = s->n;
    ws(c);
    if (c->p < c->end && *c->p == '}') { c->p++; return S_PHASE; }  /* {}: no phase */
    for (;;) {
        size_t koff, klen;
        int esc;
        if (c->p >= c->end || *c->p != '"') return S_BAD;
        if ((r = scan_string(c, &koff, &klen, &esc))) return r;
        if (esc) return S_BAD;
        int f = field_of(c->base + koff, klen);
        ws(c);
        if (c->p >= c->end || *c->p != ':') return S_BAD;
        c->p++;
        ws(c);
        if (f != F_OTHER) {
            if (seen & (1u << f)) return S_BAD;  /* a key twice */
            seen |= 1u << f;
        }
        const uint8_t *v0 = c->p;
        switch (f) {
        case F_PH: {
            size_t off, len;
            if (c->p >= c->end || *c->p != '"') return S_BAD;
            if ((r = scan_string(c, &off, &len, &esc))) return r;
            ph = esc ? -1 : ph_code(c->base + off, len);
            if (ph < 0) return esc ? S_BAD : S_PHASE;
            break;
        }
        case F_TS: if ((r = field_double(c, &ts))) return r; break;
        case F_DUR: if ((r = field_double(c, &dur))) return r; break;
        case F_PID: if ((r = field_id(s, &pid[0], &pid[1], 0))) return r; break;
        case F_TID: if ((r = field_id(s, &tid[0], &tid[1], 0))) return r; break;
        case F_ID: if ((r = field_id(s, &fid[0], &fid[1], 1))) return r; break;
        case F_NAME: if ((r = field_str(s, &name))) return r; break;
        case F_CAT: if ((r = field_str(s, &cat))) return r; break;
        case F_ARGS: if ((r = field_args(s, idx, &has, &alen))) return r; break;
        case F_NP_SLICE: {
            Num n;
            if (scan_number(c, &n) || num_int64(&n, &hint)) return S_BAD;
            break;
        }
        case F_BP:
            if (c->p < c->end && *c->p == '"') {
                size_t off, len;
                if ((r = scan_string(c, &off, &len, &esc))) return r;
                if (esc) return S_BAD;  /* "\u0065" is "e" too: the msgspec path decodes it */
                bp = len == 1 && c->base[off] == 'e';
                break;
            }
            if ((r = skip_value(c, 1))) return r;
            break;
        case F_ID2: case F_BIND_ID: case F_FLOW_IN: case F_FLOW_OUT: {
            if ((r = skip_value(c, 1))) return r;
            int64_t rec[4] = {idx, f, (int64_t)(v0 - c->base), (int64_t)(c->p - c->base)};
            if (buf_put(&s->sparse, rec, sizeof(rec))) return S_NOMEM;
            break;
        }
        default:
            if ((r = skip_value(c, 1))) return r;
        }
        ws(c);
        if (c->p >= c->end) return S_BAD;
        if (*c->p == ',') { c->p++; ws(c); continue; }
        if (*c->p != '}') return S_BAD;
        c->p++;
        break;
    }
    if (ph < 0) return S_PHASE;
    int g = group_of(ph);
    if (g && has) {  /* the args were copied with the X events': move them to their group's blob */
        Buf *to = &s->gblob[g - 1];
        size_t at = s->blob.n - (size_t)alen;
        if (buf_put(to, s->blob.d + at, (size_t)alen)) return S_NOMEM;
        s->blob.n = at;
    }
    int64_t pk[KEYW] = {pid[0], pid[1], tid[0], tid[1]};
    int32_t tr = s->last_tr;
    if (tr < 0 || memcmp(pk, s->last_pk, sizeof(pk))) {
        tr = s->last_tr = keytab_id(&s->pairs, pk);
        memcpy(s->last_pk, pk, sizeof(pk));
    }
    int32_t fk = -1;
    if (tr < 0) return S_NOMEM;
    if (ph >= 1 && ph <= 3) {
        int64_t k[KEYW] = {cat, name, fid[0], fid[1]};
        if ((fk = keytab_id(&s->fkeys, k)) < 0) return S_NOMEM;
    }
    PUT(&s->ph, uint8_t, (uint8_t)ph);
    PUT(&s->ts, double, ts);
    PUT(&s->dur, double, dur);
    PUT(&s->track, int32_t, tr);
    PUT(&s->name, int32_t, name);
    PUT(&s->cat, int32_t, cat);
    PUT(&s->has, uint8_t, has);
    PUT(&s->alen, int64_t, alen);
    PUT(&s->fkey, int32_t, fk);
    PUT(&s->bp, uint8_t, bp);
    PUT(&s->hint, int64_t, hint);
    s->n++;
    return S_OK;
}

/* The orders of first use (see Scan.order), once the piece is scanned. */
static int first_orders(Scan *s) {
    size_t sizes[4] = {s->pairs.n, s->strs.n, s->strs.n, s->fkeys.n};
    size_t total = sizes[0] + sizes[1] + sizes[2] + sizes[3] + 4;
    uint8_t *seen = (uint8_t *)malloc(total * 3);
    if (!seen) return S_NOMEM;
    memset(seen, 0, total * 3);
    const uint8_t *ph = s->ph.d;
    const int32_t *cols[4] = {(const int32_t *)s->track.d, (const int32_t *)s->name.d, (const int32_t *)s->cat.d,
                              (const int32_t *)s->fkey.d};
    for (int64_t i = 0; i < s->n; i++) {
        int g = group_of(ph[i]);
        uint8_t *sg = seen + total * g;
        for (int k = 0; k < 4; k++) {
            int32_t v = cols[k][i];
            if (v < 0) continue;
            uint8_t *m = sg + (k ? sizes[0] + 1 : 0) + (k > 1 ? sizes[1] + 1 : 0) + (k > 2 ? sizes[2] + 1 : 0);
            if (!m[v]) {
                m[v] = 1;
                if (buf_put(&s->order[g][k], &v, sizeof(v))) { free(seen); return S_NOMEM; }
            }
        }
    }
    free(seen);
    return S_OK;
}

static int scan_all(Scan *s) {
    Cur *c = &s->c;
    int r;
    if (strtab_id(&s->strs, 0, 0, 0) != 0) return S_NOMEM;  /* "" first: the default name and cat */
    /* args are copied without bounds checks: their copies are never longer than the piece */
    if (buf_reserve(&s->blob, (size_t)(c->end - c->p) + 16)) return S_NOMEM;
    ws(c);
    if (c->p >= c->end) return S_BAD;
    for (;;) {
        if ((r = scan_event(s))) return r;
        ws(c);
        if (c->p >= c->end) return first_orders(s);
        if (*c->p != ',') return S_BAD;
        c->p++;
        ws(c);
    }
}

/* Scan states kept for the next call (their buffers keep their capacity: no fresh pages to fault in for
 * every piece). Taken and given back with the GIL held, so no lock is needed. */
#define POOL 8
static Scan *pool[POOL];
static int npool;

static Scan *scan_take(void) {
    if (npool) {
        Scan *s = pool[--npool];
        Buf *bufs[] = {&s->ph, &s->ts, &s->dur, &s->track, &s->name, &s->cat, &s->has, &s->alen, &s->fkey,
                       &s->bp, &s->hint, &s->blob, &s->redo, &s->sparse, &s->gblob[0], &s->gblob[1]};
        for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) bufs[i]->n = 0;
        for (int g = 0; g < 3; g++)
            for (int k = 0; k < 4; k++) s->order[g][k].n = 0;
        s->strs.n = s->pairs.n = s->fkeys.n = 0;
        if (s->strs.slots) memset(s->strs.slots, 0xff, s->strs.nslots * sizeof(int32_t));
        if (s->pairs.slots) memset(s->pairs.slots, 0xff, s->pairs.nslots * sizeof(int32_t));
        if (s->fkeys.slots) memset(s->fkeys.slots, 0xff, s->fkeys.nslots * sizeof(int32_t));
        s->n = 0;
        s->last_tr = -1;
        return s;
    }
    Scan *s = (Scan *)calloc(1, sizeof(Scan));
    if (s) s->last_tr = -1;
    return s;
}

static void scan_free(Scan *s);

static void scan_give(Scan *s) {
    if (npool < POOL) pool[npool++] = s;
    else { scan_free(s); free(s); }
}

static void scan_free(Scan *s) {
    Buf *bufs[] = {&s->ph, &s->ts, &s->dur, &s->track, &s->name, &s->cat, &s->has, &s->alen, &s->fkey,
                   &s->bp, &s->hint, &s->blob, &s->redo, &s->sparse};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) free(bufs[i]->d);
    for (int g = 0; g < 3; g++)
        for (int k = 0; k < 4; k++) free(s->order[g][k].d);
    free(s->gblob[0].d);
    free(s->gblob[1].d);
    strtab_free(&s->strs);
    keytab_free(&s->pairs);
    keytab_free(&s->fkeys);
}

#include "_jscan_py.h"

static PyObject *jscan_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &lo, &hi)) return NULL;
    if (lo < 0 || hi > view.len || lo > hi) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "range outside the buffer");
        return NULL;
    }
    Scan *sp = scan_take();
    if (!sp) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    Scan s = *sp;  /* a copy on the stack, its buffers given back below */
    const uint8_t *base = (const uint8_t *)view.buf;
    s.c.base = base;
    s.c.p = base + lo;
    s.c.end = base + hi;
    s.strs.base = base;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = scan_all(&s);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (r == S_NOMEM) {
        PyErr_NoMemory();
    } else if (r != S_OK) {
        out = PyLong_FromLong(r);
    } else {
        out = Py_BuildValue("(LNNNNNNNNNNNNNNNNNNNN)", (long long)s.n, bytes_of(&s.ph), bytes_of(&s.ts),
                            bytes_of(&s.dur), bytes_of(&s.track), bytes_of(&s.name), bytes_of(&s.cat),
                            bytes_of(&s.has), bytes_of(&s.alen), bytes_of(&s.fkey), bytes_of(&s.bp),
                            bytes_of(&s.hint), bytes_of(&s.blob), bytes_of(&s.redo), bytes_of(&s.sparse),
                            strings_of(&s.strs), keys_of(&s.pairs), keys_of(&s.fkeys),
                            orders_of(&s), bytes_of(&s.gblob[0]), bytes_of(&s.gblob[1]));
    }
    *sp = s;
    scan_give(sp);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", jscan_scan, METH_VARARGS,
     "scan(buf, lo, hi) -> tuple of columns, or 1 (refused) / 2 (a phase the scanner does not read)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jscan",
                                    "The compiled scanner of Chrome/Kineto traceEvents (see _json_scan.py).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__jscan(void) { return PyModule_Create(&module); }
