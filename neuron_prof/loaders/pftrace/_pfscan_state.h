/* The state of one .pftrace scan (_pfscan.c): the loader's Python objects it calls, the Seq of the packet
 * sequence at hand with its tables, and the event columns being filled. Called with the GIL held. */

#define NCACHE 4096  /* iids below this have their name / string value fragments cached per sequence */

#define ACACHE (1 << 16)  /* slots of the cache of annotation bytes -> fragments (filled to half at most) */

/* One entry of that cache: the annotation's bytes (in the scanned buffer), its sequence and fragment (new refs). */
typedef struct { const uint8_t *k; size_t n; uint64_t h; PyObject *seq, *frag; } AEnt;

typedef struct {
    /* from the loader (_pftrace_scan.Hooks): new references */
    PyObject *seqs, *seq_type, *intern, *dumps, *on_interned, *on_descriptor, *on_frag, *on_packet;
    /* the current Seq and its dicts (new references) */
    PyObject *seq, *names, *cats, *name_frag, *value_json, *annot_cache;
    int32_t ids[2][NCACHE];             /* names.get(iid) and cats.get(iid) for small iids, valid where */
    uint32_t ids_gen[2][NCACHE], gen;   /* ids_gen == gen: bumped when the sequence or its interned data change */
    uint64_t seq_sid;                   /* the sequence id st->seq is seqs[] of, while seq_sid_ok */
    int seq_sid_ok;
    PyObject *nf[NCACHE], *vj[NCACHE];  /* name_frag[iid], value_json[iid] (new references; the Python side
                                           only ever adds to those dicts, never replaces an entry) */
    AEnt *acache;                                                /* ACACHE slots: Seq.annot_cache's hits */
    size_t acount;
    Buf ts, uuid, typ, name, cat, args, value, fev, fid, fsec;  /* the columns (grown in bytes objects) */
    Buf ablob, aend;    /* every event's args (JSON objects back to back) and where each ends (int64) */
    Buf flows;          /* scratch: one event's flow ids */
    int64_t n, n_args;  /* events and args so far */
} St;

static void st_drop_seq(St *st) {
    st->gen++;
    for (int i = 0; i < NCACHE; i++) {
        Py_CLEAR(st->nf[i]);
        Py_CLEAR(st->vj[i]);
    }
    Py_CLEAR(st->seq);
    Py_CLEAR(st->names);
    Py_CLEAR(st->cats);
    Py_CLEAR(st->name_frag);
    Py_CLEAR(st->value_json);
    Py_CLEAR(st->annot_cache);
}

/* Buf.grow of the outputs: the bytes live in a bytes object, handed out whole at the end (no copy). */
static int grow_bytes(Buf *b, size_t cap) {
    PyObject *o = (PyObject *)b->owner;
    if (!o) o = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
    else if (_PyBytes_Resize(&o, (Py_ssize_t)cap)) o = NULL;  /* it freed the old object */
    b->owner = o;
    if (!o) {
        PyErr_Clear();  /* the caller says MemoryError */
        b->d = NULL;
        b->n = b->cap = 0;
        return -1;
    }
    b->d = (uint8_t *)PyBytes_AS_STRING(o);
    b->cap = cap;
    return 0;
}

/* The bytes of an output Buf (a new reference; the Buf is left empty). */
static PyObject *take_bytes(Buf *b) {
    PyObject *o = (PyObject *)b->owner;
    b->owner = NULL;
    if (!o) return PyBytes_FromStringAndSize(NULL, 0);
    if (_PyBytes_Resize(&o, (Py_ssize_t)b->n)) return NULL;
    b->d = NULL;
    b->n = b->cap = 0;
    return o;
}

static void st_free(St *st) {
    st_drop_seq(st);
    for (size_t i = 0; st->acache && i < ACACHE; i++) {
        Py_XDECREF(st->acache[i].seq);
        Py_XDECREF(st->acache[i].frag);
    }
    free(st->acache);
    PyObject **refs[] = {&st->seqs, &st->seq_type, &st->intern, &st->dumps, &st->on_interned,
                         &st->on_descriptor, &st->on_frag, &st->on_packet};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) Py_CLEAR(*refs[i]);
    Buf *bufs[] = {&st->ts, &st->uuid, &st->typ, &st->name, &st->cat, &st->args, &st->value, &st->fev, &st->fid,
                   &st->fsec, &st->ablob, &st->aend, &st->flows};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (bufs[i]->grow) Py_XDECREF((PyObject *)bufs[i]->owner);
        else free(bufs[i]->d);
    }
}

static PyObject *dict_attr(PyObject *o, const char *name) {
    PyObject *d = PyObject_GetAttrString(o, name);
    if (d && !PyDict_Check(d)) {
        Py_DECREF(d);
        PyErr_Format(PyExc_TypeError, "Seq.%s is not a dict", name);
        return NULL;
    }
    return d;
}

/* Make `seq` (borrowed) the current sequence: its dicts are looked up once per change of sequence. */
static int st_set_seq(St *st, PyObject *seq) {
    if (seq == st->seq) return 0;
    st_drop_seq(st);
    Py_INCREF(seq);
    st->seq = seq;
    if (!(st->names = dict_attr(seq, "names")) || !(st->cats = dict_attr(seq, "cats"))
        || !(st->name_frag = dict_attr(seq, "name_frag")) || !(st->value_json = dict_attr(seq, "value_json"))
        || !(st->annot_cache = dict_attr(seq, "annot_cache")))
        return -1;
    return 0;
}

/* The Seq of sequence `sid` (a new one when there is none yet or the packet clears the incremental state). */
static int st_seq(St *st, uint64_t sid, int clear) {
    if (!clear && st->seq_sid_ok && sid == st->seq_sid) return 0;  /* seqs[sid] is st->seq still */
    PyObject *key = PyLong_FromUnsignedLongLong(sid);
    if (!key) return -1;
    PyObject *seq = PyDict_GetItemWithError(st->seqs, key);  /* borrowed */
    if (!seq && PyErr_Occurred()) { Py_DECREF(key); return -1; }
    int r;
    if (seq && !clear) r = st_set_seq(st, seq);
    else {
        seq = PyObject_CallNoArgs(st->seq_type);
        r = seq ? PyDict_SetItem(st->seqs, key, seq) : -1;
        if (!r) r = st_set_seq(st, seq);
        Py_XDECREF(seq);
    }
    Py_DECREF(key);
    st->seq_sid = sid;
    st->seq_sid_ok = !r;
    return r;
}

/* d.get(iid) for a dict keyed by int: borrowed, NULL with no error set when absent. */
static PyObject *dict_iid(PyObject *d, uint64_t iid) {
    PyObject *key = PyLong_FromUnsignedLongLong(iid);
    if (!key) return NULL;
    PyObject *v = PyDict_GetItemWithError(d, key);
    Py_DECREF(key);
    return v;
}

/* d.get(iid), cached in cache[iid] for small iids: borrowed, NULL with no error set when absent. */
static PyObject *cached_iid(PyObject *d, PyObject **cache, uint64_t iid) {
    if (iid < NCACHE && cache[iid]) return cache[iid];
    PyObject *v = dict_iid(d, iid);
    if (v && iid < NCACHE) {
        Py_INCREF(v);
        cache[iid] = v;
    }
    return v;
}

static uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}

/* The slot of (current sequence, s[:n]) in the annotation cache: the entry, or the empty slot to fill. */
static AEnt *acache_slot(St *st, const uint8_t *s, size_t n, uint64_t h) {
    size_t i = (size_t)(h ^ (uintptr_t)st->seq) & (ACACHE - 1);
    while (st->acache[i].frag) {
        AEnt *e = &st->acache[i];
        if (e->h == h && e->seq == st->seq && e->n == n && !memcmp(e->k, s, n)) return e;
        i = (i + 1) & (ACACHE - 1);
    }
    return &st->acache[i];
}

/* The fragment of annotation bytes s[:n] in the current Seq's annot_cache (a new reference), NULL with no
 * error when it holds none. Hits are kept in st->acache: the Python side only ever adds to that dict. */
static PyObject *annot_cached(St *st, const uint8_t *s, size_t n) {
    uint64_t h = hash_bytes(s, n);
    AEnt *e = acache_slot(st, s, n, h);
    if (e->frag) { Py_INCREF(e->frag); return e->frag; }
    PyObject *key = PyBytes_FromStringAndSize((const char *)s, (Py_ssize_t)n);
    if (!key) return NULL;
    PyObject *frag = PyDict_GetItemWithError(st->annot_cache, key);  /* borrowed */
    Py_DECREF(key);
    if (!frag) return NULL;
    if (st->acount < ACACHE / 2) {
        *e = (AEnt){s, n, h, st->seq, frag};
        Py_INCREF(st->seq);
        Py_INCREF(frag);
        st->acount++;
    }
    Py_INCREF(frag);
    return frag;
}

/* names.get(iid, 0) (which 0) / cats.get(iid, 0) (which 1): a model string id. */
static int iid_string(St *st, int which, uint64_t iid, int32_t *out) {
    if (iid < NCACHE && st->ids_gen[which][iid] == st->gen) { *out = st->ids[which][iid]; return 0; }
    PyObject *v = dict_iid(which ? st->cats : st->names, iid);
    long x = 0;
    if (!v && PyErr_Occurred()) return -1;
    if (v && (x = PyLong_AsLong(v)) == -1 && PyErr_Occurred()) return -1;
    *out = (int32_t)x;
    if (iid < NCACHE) {
        st->ids[which][iid] = *out;
        st->ids_gen[which][iid] = st->gen;
    }
    return 0;
}

/* intern(text(s)): the model string id of a proto string (undecodable bytes replaced, as the Python path). */
static int intern_utf8(St *st, const uint8_t *s, size_t n, int32_t *out) {
    PyObject *u = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, "replace");
    if (!u) return -1;
    PyObject *r = PyObject_CallOneArg(st->intern, u);
    Py_DECREF(u);
    if (!r) return -1;
    long x = PyLong_AsLong(r);
    Py_DECREF(r);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = (int32_t)x;
    return 0;
}

/* hook(bytes(s[:n])) -> the result (new reference) */
static PyObject *call_bytes(PyObject *hook, PyObject *first, const uint8_t *s, size_t n) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)s, (Py_ssize_t)n);
    if (!b) return NULL;
    PyObject *r = first ? PyObject_CallFunctionObjArgs(hook, first, b, NULL) : PyObject_CallOneArg(hook, b);
    Py_DECREF(b);
    return r;
}

/* The args st->ablob holds from `start` on (one JSON object) as the next args: their index. */
static int64_t st_end_args(St *st) {
    int64_t end = (int64_t)st->ablob.n;
    if (buf_put(&st->aend, &end, 8)) { PyErr_NoMemory(); return -1; }
    return st->n_args++;
}

/* One event row; `value` is written for counters only (the Python path's list of counter values). */
static int st_row(St *st, uint64_t ts, uint64_t uuid, int8_t typ, int32_t name, int32_t cat, int64_t args,
                  double value) {
    if (buf_put(&st->ts, &ts, 8) || buf_put(&st->uuid, &uuid, 8) || buf_put(&st->typ, &typ, 1)
        || buf_put(&st->name, &name, 4) || buf_put(&st->cat, &cat, 4) || buf_put(&st->args, &args, 8)
        || (typ == 4 && buf_put(&st->value, &value, 8))) {
        PyErr_NoMemory();
        return -1;
    }
    st->n++;
    return 0;
}

/* Flow endpoints on the last event: st->flows holds their ids (uint64), `sec` the file section. */
static int st_flows(St *st, int64_t sec) {
    int64_t ev = st->n - 1;
    for (size_t i = 0; i < st->flows.n; i += 8)
        if (buf_put(&st->fev, &ev, 8) || buf_put(&st->fid, st->flows.d + i, 8) || buf_put(&st->fsec, &sec, 8)) {
            PyErr_NoMemory();
            return -1;
        }
    st->flows.n = 0;
    return 0;
}
