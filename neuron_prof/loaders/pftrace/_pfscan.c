/* neuron_prof.loaders.pftrace._pfscan: the packets of a .pftrace (Trace { repeated TracePacket packet = 1; }) walked
 * in C, filling the loader's event columns directly.
 *
 *     frame(buf) -> int                    length of the longest prefix of whole packets
 *     scan(buf, oneof, hooks) -> tuple     the columns (bytes): ts u64, uuid u64, type i8, name i32, cat i32,
 *                                          args i64, counter values f64, flow event i64, flow id u64, section i64;
 *                                          the args (JSON objects back to back) and their ends i64
 *
 * TrackEvent packets are read here by the rules of neuron_prof/loaders/pftrace/reader.py (_Reader.packet). The rare
 * parts go to the loader's Python hooks (_pftrace_scan.Hooks), with their bytes: interned_data, track
 * descriptors, debug annotations other than a scalar under an interned name (decoded once per distinct bytes
 * per sequence: the Seq's annot_cache), and whole packets that repeat a message field (protobuf merges them).
 * Damaged bytes raise ValueError; the caller says the file is not a Perfetto trace. Little-endian hosts. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_pfscan_wire.h"
#include "_pfscan_state.h"

static PyObject *damaged(const uint8_t *at, const uint8_t *base) {
    return PyErr_Format(PyExc_ValueError, "damaged protobuf in the packet at byte %zd", (Py_ssize_t)(at - base));
}

/* A string literal's bytes (its length known at compile time). */
#define PUT_LIT(b, lit) put_raw((b), (lit), sizeof(lit) - 1)

HOT int put_raw(Buf *b, const char *s, size_t n) {
    if (buf_put(b, s, n)) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* An integer in decimal, as Python's "%d" writes it. */
static int put_int(Buf *b, uint64_t u, int negative) {
    char tmp[24], *end = tmp + sizeof tmp, *p = end;
    if (negative) u = 0 - u;
    do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
    if (negative) *--p = '-';
    if (buf_put(b, p, (size_t)(end - p))) { PyErr_NoMemory(); return -1; }
    return 0;
}

static int put_bytes(Buf *b, PyObject *o) {
    if (!PyBytes_Check(o)) { PyErr_SetString(PyExc_TypeError, "an annotation fragment is not bytes"); return -1; }
    if (buf_put(b, PyBytes_AS_STRING(o), (size_t)PyBytes_GET_SIZE(o))) { PyErr_NoMemory(); return -1; }
    return 0;
}

/* One debug annotation with a cached name fragment (iid != 0) and a scalar value, written as '"name":value'
 * the way _pftrace_decode.fragment writes it. 1: written; 0: another kind (the caller asks Python); -1: error
 * (-2: damaged). */
static int annot_fast(St *st, const uint8_t *s, size_t n) {
    Rd r = {s, s + n};
    Fld f, val = {0};
    int k, has_name = 0, has_val = 0;
    uint64_t iid = 0;
    while ((k = rd_field(&r, &f)) > 0) {
        if (FNUM(f) == A_NAME_IID && FWT(f) == WT_VARINT && !has_name) { has_name = 1; iid = f.v; continue; }
        if (has_val) return 0;
        uint32_t num = FNUM(f);
        if ((FWT(f) == WT_VARINT && (num == A_INT || num == A_UINT || num == A_BOOL || num == A_STR_IID))
            || (FWT(f) == WT_I64 && num == A_DOUBLE)) { has_val = 1; val = f; continue; }
        return 0;
    }
    if (k < 0) return -2;
    if (!has_name || !has_val || !iid) return 0;
    PyObject *nf = cached_iid(st->name_frag, st->nf, iid);
    if (!nf) return PyErr_Occurred() ? -1 : 0;
    PyObject *sv = NULL;
    if (FNUM(val) == A_STR_IID && !(sv = cached_iid(st->value_json, st->vj, val.v))) return PyErr_Occurred() ? -1 : 0;
    size_t mark = st->ablob.n;
    if (put_bytes(&st->ablob, nf)) return -1;
    switch (FNUM(val)) {
    case A_INT: return put_int(&st->ablob, val.v, (int64_t)val.v < 0) ? -1 : 1;
    case A_UINT: return put_int(&st->ablob, val.v, 0) ? -1 : 1;
    case A_BOOL: return (val.v ? PUT_LIT(&st->ablob, "true") : PUT_LIT(&st->ablob, "false")) ? -1 : 1;
    case A_STR_IID: return put_bytes(&st->ablob, sv) ? -1 : 1;
    default: {
        double d;
        memcpy(&d, &val.v, 8);
        PyObject *x = PyFloat_FromDouble(d);
        PyObject *j = x ? PyObject_CallOneArg(st->dumps, x) : NULL;
        Py_XDECREF(x);
        int e = j ? put_bytes(&st->ablob, j) : -1;
        Py_XDECREF(j);
        if (e) st->ablob.n = mark;
        return e ? -1 : 1;
    }
    }
}

/* The args of an event as one JSON object appended to st->ablob: *out its index. 1: the event is neuron-prof's
 * metadata instant (read by the hook, not an event); 0: done; -1: error; -2: damaged. */
static int event_args(St *st, const uint8_t *te, size_t te_n, int typ, int64_t *out) {
    Rd r = {te, te + te_n};
    Fld f;
    int k, first = 1, e = 0;
    size_t start = st->ablob.n;
    if (PUT_LIT(&st->ablob, "{")) return -1;
    while (!e && (k = rd_field(&r, &f)) > 0) {
        if (FNUM(f) != T_ANNOTS || FWT(f) != WT_LEN) continue;
        if (!first && PUT_LIT(&st->ablob, ",")) { e = -1; break; }
        first = 0;
        int fast = annot_fast(st, f.s, f.n);
        if (fast) { e = fast < 0 ? fast : 0; continue; }
        PyObject *frag = annot_cached(st, f.s, f.n);
        if (!frag && !PyErr_Occurred()) {
            PyObject *t = PyLong_FromLong(typ);
            PyObject *key = PyBytes_FromStringAndSize((const char *)f.s, (Py_ssize_t)f.n);
            frag = t && key ? PyObject_CallFunctionObjArgs(st->on_frag, st->seq, t, key, NULL) : NULL;
            Py_XDECREF(t);
            Py_XDECREF(key);
        }
        if (!frag) e = -1;
        else if (frag == Py_None) e = 1;
        else e = put_bytes(&st->ablob, frag);
        Py_XDECREF(frag);
    }
    if (!e && k < 0) e = -2;
    if (!e && PUT_LIT(&st->ablob, "}")) e = -1;
    if (e) {
        st->ablob.n = start;  /* nothing of this event's args stays */
        return e;
    }
    return (*out = st_end_args(st)) < 0 ? -1 : 0;
}

/* A packet the Python hook reads whole: it returns None or (ts, uuid, type, name, cat, args JSON or None,
 * counter value, flow ids, sequence id). */
static int packet_by_hook(St *st, const uint8_t *s, size_t n) {
    st->seq_sid_ok = 0;  /* the hook may put a new Seq in seqs, or intern names in the current one */
    st->gen++;
    PyObject *row = call_bytes(st->on_packet, NULL, s, n);
    if (!row) return -1;
    int r = 0;
    if (row != Py_None) {
        unsigned long long ts, uuid, sid;
        int typ, name, cat;
        int64_t args = -1;
        PyObject *value, *flows, *raw;
        r = -1;
        if (PyArg_ParseTuple(row, "KKiiiOOOK", &ts, &uuid, &typ, &name, &cat, &raw, &value, &flows, &sid)
            && (raw == Py_None || (!put_bytes(&st->ablob, raw) && (args = st_end_args(st)) >= 0))) {
            double v = value == Py_None ? 0.0 : PyFloat_AsDouble(value);
            r = v == -1.0 && PyErr_Occurred() ? -1 : st_row(st, ts, uuid, (int8_t)typ, name, cat, args, v);
            Py_ssize_t nf = r ? 0 : PySequence_Length(flows);
            r = nf < 0 ? -1 : r;
            for (Py_ssize_t i = 0; !r && i < nf; i++) {
                PyObject *x = PySequence_GetItem(flows, i);
                unsigned long long id = x ? PyLong_AsUnsignedLongLong(x) : (unsigned long long)-1;
                Py_XDECREF(x);
                r = id == (unsigned long long)-1 && PyErr_Occurred() ? -1 : buf_put(&st->flows, &id, 8);
            }
            if (!r) r = st_flows(st, (int64_t)(sid >> 8));
            else st->flows.n = 0;
        }
    }
    Py_DECREF(row);
    return r;
}

/* One packet (s[:n]): 0 done, -1 error, -2 damaged. */
static int packet(St *st, const uint8_t *s, size_t n, const uint8_t *oneof) {
    Packet pk;
    Event ev;
    if (read_packet(s, n, oneof, &pk) < 0) return -2;
    if (pk.dup) return packet_by_hook(st, s, n);
    int is_te = pk.kind == P_TRACK_EVENT;
    if (is_te) {
        if (read_event(pk.te, pk.te_n, &ev) < 0) return -2;
        if (ev.type == 2 && !pk.flags)  /* an END without sequence flags: four fields, no sequence state */
            return st_row(st, pk.ts, ev.uuid, 2, 0, 0, -1, 0.0);
    }
    if (st_seq(st, pk.sid, (pk.flags & 1) || pk.cleared)) return -1;
    if (pk.has_idd) {
        st->gen++;  /* names and categories may change */
        PyObject *r = call_bytes(st->on_interned, st->seq, pk.idd, pk.idd_n);
        if (!r) return -1;
        Py_DECREF(r);
    }
    if (!is_te) {
        if (pk.kind == P_DESCRIPTOR) {
            PyObject *r = call_bytes(st->on_descriptor, NULL, pk.td, pk.td_n);
            if (!r) return -1;
            Py_DECREF(r);
        }
        return 0;
    }
    int typ = (int)ev.type;
    if (typ < 1 || typ > 4) return 0;
    int32_t name = 0, cat = 0;
    int64_t args = -1;
    if (typ != 2 && ev.name_kind == 1 && iid_string(st, 0, ev.name_iid, &name)) return -1;
    if (typ != 2 && ev.name_kind == 2 && intern_utf8(st, ev.name, ev.name_n, &name)) return -1;
    if (ev.n_annots && typ != 2) {
        int a = event_args(st, pk.te, pk.te_n, typ, &args);
        if (a) return a > 0 ? 0 : a;  /* 1: the metadata instant, read by the hook */
    }
    if (ev.cat_kind == 1 && iid_string(st, 1, ev.cat_iid, &cat)) return -1;
    if (ev.cat_kind == 2 && intern_utf8(st, ev.cat, ev.cat_n, &cat)) return -1;
    double value = ev.counter_kind == 2 ? ev.dcounter : (double)(int64_t)ev.counter;
    if (st_row(st, pk.ts, ev.uuid, (int8_t)typ, name, cat, args, value)) return -1;
    if (ev.n_flows) {
        int e = event_flows(pk.te, pk.te_n, T_FLOWS, &st->flows);
        if (!e) e = event_flows(pk.te, pk.te_n, T_TFLOWS, &st->flows);
        if (e == -2) { PyErr_NoMemory(); return -1; }
        if (e < 0) return -2;
        return st_flows(st, (int64_t)(pk.sid >> 8));
    }
    return 0;
}

static int hook(PyObject *hooks, const char *name, PyObject **out) {
    return (*out = PyObject_GetAttrString(hooks, name)) ? 0 : -1;  /* released by st_free */
}

static PyObject *pfscan_scan(PyObject *self, PyObject *argv) {
    Py_buffer data, oneof;
    PyObject *hooks;
    if (!PyArg_ParseTuple(argv, "y*y*O", &data, &oneof, &hooks)) return NULL;
    PyObject *out = NULL;
    St *st = (St *)calloc(1, sizeof(St));  /* with its caches: too big for the stack */
    if (!st) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&oneof);
        return PyErr_NoMemory();
    }
    if (oneof.len < 128) { PyErr_SetString(PyExc_ValueError, "oneof: a bitmap of 1024 bits"); goto done; }
    if (hook(hooks, "seqs", &st->seqs) || hook(hooks, "seq_type", &st->seq_type) || hook(hooks, "intern", &st->intern)
        || hook(hooks, "dumps", &st->dumps)
        || hook(hooks, "interned", &st->on_interned) || hook(hooks, "descriptor", &st->on_descriptor)
        || hook(hooks, "frag", &st->on_frag) || hook(hooks, "packet", &st->on_packet))
        goto done;
    if (!PyDict_Check(st->seqs)) { PyErr_SetString(PyExc_TypeError, "hooks.seqs is not a dict"); goto done; }
    if (!(st->acache = (AEnt *)calloc(ACACHE, sizeof(AEnt)))) { PyErr_NoMemory(); goto done; }
    st->gen = 1;  /* ids_gen starts at 0: nothing cached */
    Buf *outs[12] = {&st->ts, &st->uuid, &st->typ, &st->name, &st->cat, &st->args, &st->value, &st->fev, &st->fid,
                     &st->fsec, &st->ablob, &st->aend};
    for (int i = 0; i < 12; i++) outs[i]->grow = grow_bytes;
    const uint8_t *base = (const uint8_t *)data.buf;
    Rd r = {base, base + data.len};
    Fld f;
    int k;
    while ((k = rd_field(&r, &f)) > 0) {
        if (FNUM(f) != 1 || FWT(f) != WT_LEN) continue;  /* Trace has no other field: unknown ones are skipped */
        int e = packet(st, f.s, f.n, (const uint8_t *)oneof.buf);
        if (e == -2) { damaged(f.s, base); goto done; }
        if (e) goto done;
    }
    if (k < 0) { damaged(r.p, base); goto done; }
    out = PyTuple_New(12);
    for (int i = 0; out && i < 12; i++) {
        PyObject *b = take_bytes(outs[i]);
        if (!b) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, b);
    }
done:
    st_free(st);
    free(st);
    PyBuffer_Release(&data);
    PyBuffer_Release(&oneof);
    return out;
}

static PyObject *pfscan_frame(PyObject *self, PyObject *argv) {
    Py_buffer data;
    if (!PyArg_ParseTuple(argv, "y*", &data)) return NULL;
    size_t w = whole_packets((const uint8_t *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromSize_t(w);
}

static PyMethodDef methods[] = {
    {"frame", pfscan_frame, METH_VARARGS, "frame(buf) -> length of the longest prefix made of whole packets"},
    {"scan", pfscan_scan, METH_VARARGS, "scan(buf, oneof, hooks) -> the event columns as bytes (see _pftrace_scan)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pfscan",
                                    "The compiled packet walk of the .pftrace loader (see _pftrace_scan.py).", -1,
                                    methods};

/* The field numbers this walk reads, by their proto names (tests compare them with perfetto's descriptors). */
static PyObject *fields(void) {
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
        "Trace.packet", 1, "TracePacket.timestamp", P_TIMESTAMP, "TracePacket.trusted_packet_sequence_id", P_SEQ_ID,
        "TracePacket.track_event", P_TRACK_EVENT, "TracePacket.interned_data", P_INTERNED,
        "TracePacket.sequence_flags", P_SEQ_FLAGS, "TracePacket.incremental_state_cleared", P_CLEARED,
        "TracePacket.track_descriptor", P_DESCRIPTOR, "TrackEvent.category_iids", T_CAT_IIDS,
        "TrackEvent.debug_annotations", T_ANNOTS, "TrackEvent.type", T_TYPE, "TrackEvent.name_iid", T_NAME_IID,
        "TrackEvent.track_uuid", T_UUID, "TrackEvent.categories", T_CATS, "TrackEvent.name", T_NAME,
        "TrackEvent.counter_value", T_COUNTER, "TrackEvent.double_counter_value", T_DCOUNTER,
        "TrackEvent.flow_ids", T_FLOWS, "TrackEvent.terminating_flow_ids", T_TFLOWS,
        "DebugAnnotation.name_iid", A_NAME_IID, "DebugAnnotation.bool_value", A_BOOL,
        "DebugAnnotation.uint_value", A_UINT, "DebugAnnotation.int_value", A_INT,
        "DebugAnnotation.double_value", A_DOUBLE, "DebugAnnotation.string_value_iid", A_STR_IID);
}

PyMODINIT_FUNC PyInit__pfscan(void) {
    PyObject *m = PyModule_Create(&module);
    PyObject *f = m ? fields() : NULL;
    if (!f || PyModule_AddObject(m, "FIELDS", f)) {
        Py_XDECREF(f);
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
