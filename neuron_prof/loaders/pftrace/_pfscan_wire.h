/* The protobuf wire format as the .pftrace scanner (_pfscan.c) reads it: bounds-checked varints and fields,
 * growable buffers, and the fields of TracePacket and TrackEvent it keeps. No Python API.
 *
 * Field numbers are perfetto's (protos/perfetto/trace/perfetto_trace.proto, checked against the perfetto
 * package's descriptors in tests/test_pftrace_scan.py). Every read is bounded by the end of its message: a
 * varint longer than 10 bytes, a length past the end, or wire type 3, 4, 6 or 7 is an error (-1). */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "fixed64 fields are read as little-endian words: on this host the loader's Python path reads .pftrace"
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* TracePacket */
enum { P_TIMESTAMP = 8, P_SEQ_ID = 10, P_TRACK_EVENT = 11, P_INTERNED = 12, P_SEQ_FLAGS = 13, P_CLEARED = 41,
       P_DESCRIPTOR = 60 };
/* TrackEvent */
enum { T_CAT_IIDS = 3, T_ANNOTS = 4, T_TYPE = 9, T_NAME_IID = 10, T_UUID = 11, T_CATS = 22, T_NAME = 23,
       T_COUNTER = 30, T_DCOUNTER = 44, T_FLOWS = 47, T_TFLOWS = 48 };
/* DebugAnnotation */
enum { A_NAME_IID = 1, A_BOOL = 2, A_UINT = 3, A_INT = 4, A_DOUBLE = 5, A_STR_IID = 17 };
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct { const uint8_t *p, *end; } Rd;
/* One field: its tag whole (field number << 3 | wire type; read back as one word, no split stores to reload),
 * a varint or fixed value, or the bytes of a length-delimited one. */
typedef struct { uint64_t tag; uint64_t v; const uint8_t *s; size_t n; } Fld;
#define FNUM(f) ((uint32_t)((f).tag >> 3))
#define FWT(f) ((int)((f).tag & 7))

#define HOT static inline __attribute__((always_inline))

HOT int rd_varint(Rd *r, uint64_t *out) {
    if (r->p < r->end && *r->p < 0x80) {  /* most varints are one byte */
        *out = *r->p++;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (r->p >= r->end) return -1;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) { *out = v; return 0; }
    }
    return -1;
}

/* The next field of the message in r: 1 (read), 0 (end of the message), -1 (damaged). */
HOT int rd_field(Rd *r, Fld *f) {
    if (r->p >= r->end) return 0;
    uint64_t tag;
    if (rd_varint(r, &tag) || tag > 0xFFFFFFFFu || (tag >> 3) == 0) return -1;
    f->tag = tag;
    f->s = NULL;
    f->n = 0;
    switch ((int)(tag & 7)) {
    case WT_VARINT: return rd_varint(r, &f->v) ? -1 : 1;
    case WT_I64:
        if (r->end - r->p < 8) return -1;
        memcpy(&f->v, r->p, 8);
        r->p += 8;
        return 1;
    case WT_I32: {
        if (r->end - r->p < 4) return -1;
        uint32_t v32;
        memcpy(&v32, r->p, 4);
        f->v = v32;
        r->p += 4;
        return 1;
    }
    case WT_LEN:
        if (rd_varint(r, &f->v) || f->v > (uint64_t)(r->end - r->p)) return -1;
        f->s = r->p;
        f->n = (size_t)f->v;
        r->p += f->n;
        return 1;
    default: return -1;  /* groups (3, 4) and the unused 6, 7 */
    }
}

/* Length of the longest prefix of buf made of whole packets (Trace field 1, tag byte 0x0A). */
static size_t whole_packets(const uint8_t *buf, size_t n) {
    size_t pos = 0;
    while (pos < n) {
        if (buf[pos] != 0x0A) return pos;
        Rd r = {buf + pos + 1, buf + n};
        uint64_t len;
        if (rd_varint(&r, &len) || len > (uint64_t)(r.end - r.p)) return pos;
        pos = (size_t)(r.p - buf) + (size_t)len;
    }
    return pos;
}

/* ---- growable buffer: malloc'd, or grown by `grow` (the scan's outputs grow inside Python bytes objects) -- */
typedef struct Buf Buf;
struct Buf {
    uint8_t *d;
    size_t n, cap;
    int (*grow)(Buf *, size_t cap);  /* NULL: realloc */
    void *owner;                     /* what `grow` keeps the bytes in */
};

static int buf_grow(Buf *b, size_t len) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + len) cap *= 2;
    if (b->grow) return b->grow(b, cap);
    uint8_t *d = (uint8_t *)realloc(b->d, cap);
    if (!d) return -1;
    b->d = d;
    b->cap = cap;
    return 0;
}

HOT int buf_put(Buf *b, const void *v, size_t len) {
    if (b->n + len > b->cap && buf_grow(b, len)) return -1;
    memcpy(b->d + b->n, v, len);
    b->n += len;
    return 0;
}

/* ---- the fields of a packet and of its TrackEvent ---------------------------------------------------- */
typedef struct {
    uint64_t ts, sid, flags, cleared;
    uint32_t kind;                      /* field number of the last member of the `data` oneof, 0 if none */
    const uint8_t *te, *idd, *td;       /* track_event, interned_data, track_descriptor bytes */
    size_t te_n, idd_n, td_n;
    int has_idd, dup;                   /* dup: a message field repeated (merged by protobuf): Python reads it */
} Packet;

/* `oneof`: bitmap of the field numbers of TracePacket's `data` oneof (all length-delimited). */
static int read_packet(const uint8_t *s, size_t n, const uint8_t *oneof, Packet *pk) {
    Rd r = {s, s + n};
    Fld f;
    int k, n_te = 0, n_td = 0;
    memset(pk, 0, sizeof *pk);
    while ((k = rd_field(&r, &f)) > 0) {
        if (FWT(f) == WT_VARINT) {
            switch (FNUM(f)) {
            case P_TIMESTAMP: pk->ts = f.v; break;
            case P_SEQ_ID: pk->sid = f.v & 0xFFFFFFFFu; break;
            case P_SEQ_FLAGS: pk->flags = f.v & 0xFFFFFFFFu; break;
            case P_CLEARED: pk->cleared = f.v != 0; break;
            default: break;
            }
        } else if (FWT(f) == WT_LEN) {
            if (FNUM(f) < 1024 && (oneof[FNUM(f) >> 3] >> (FNUM(f) & 7) & 1)) pk->kind = FNUM(f);
            if (FNUM(f) == P_TRACK_EVENT) { pk->te = f.s; pk->te_n = f.n; n_te++; }
            else if (FNUM(f) == P_DESCRIPTOR) { pk->td = f.s; pk->td_n = f.n; n_td++; }
            else if (FNUM(f) == P_INTERNED) { pk->idd = f.s; pk->idd_n = f.n; pk->dup |= pk->has_idd; pk->has_idd = 1; }
        }
    }
    pk->dup |= n_te > 1 || n_td > 1;
    return k;
}

typedef struct {
    uint64_t type, uuid, name_iid, cat_iid, counter;
    double dcounter;
    const uint8_t *name, *cat;
    size_t name_n, cat_n;
    int name_kind;     /* 0 none, 1 name_iid, 2 name */
    int cat_kind;      /* 0 none, 1 the first of category_iids, 2 the first of categories */
    int has_cat_iid, has_cat_str;
    int counter_kind;  /* 0 none, 1 counter_value, 2 double_counter_value */
    int n_annots, n_flows;
} Event;

/* The first varint of a packed field; every one is checked. -1: damaged. */
static int packed_first(const uint8_t *s, size_t n, int *has, uint64_t *first) {
    Rd r = {s, s + n};
    uint64_t v;
    while (r.p < r.end) {
        if (rd_varint(&r, &v)) return -1;
        if (!*has) { *has = 1; *first = v; }
    }
    return 0;
}

static int read_event(const uint8_t *s, size_t n, Event *ev) {
    Rd r = {s, s + n};
    Fld f;
    int k;
    memset(ev, 0, sizeof *ev);
    while ((k = rd_field(&r, &f)) > 0) {
        switch (FNUM(f)) {
        case T_TYPE:  /* a closed enum: values outside it are unknown fields to protobuf */
            if (FWT(f) == WT_VARINT && (uint32_t)f.v <= 5) ev->type = (uint32_t)f.v;
            break;
        case T_UUID: if (FWT(f) == WT_VARINT) ev->uuid = f.v; break;
        case T_NAME_IID: if (FWT(f) == WT_VARINT) { ev->name_kind = 1; ev->name_iid = f.v; } break;
        case T_NAME: if (FWT(f) == WT_LEN) { ev->name_kind = 2; ev->name = f.s; ev->name_n = f.n; } break;
        case T_CAT_IIDS:
            if (FWT(f) == WT_VARINT && !ev->has_cat_iid) { ev->has_cat_iid = 1; ev->cat_iid = f.v; }
            else if (FWT(f) == WT_LEN && packed_first(f.s, f.n, &ev->has_cat_iid, &ev->cat_iid)) return -1;
            break;
        case T_CATS:
            if (FWT(f) == WT_LEN && !ev->has_cat_str) { ev->has_cat_str = 1; ev->cat = f.s; ev->cat_n = f.n; }
            break;
        case T_COUNTER: if (FWT(f) == WT_VARINT) { ev->counter_kind = 1; ev->counter = f.v; } break;
        case T_DCOUNTER:
            if (FWT(f) == WT_I64) { ev->counter_kind = 2; memcpy(&ev->dcounter, &f.v, 8); }
            break;
        case T_ANNOTS: if (FWT(f) == WT_LEN) ev->n_annots++; break;
        case T_FLOWS: case T_TFLOWS:
            if (FWT(f) == WT_I64) ev->n_flows++;
            else if (FWT(f) == WT_LEN) {
                if (f.n % 8) return -1;
                ev->n_flows += (int)(f.n / 8);
            }
            break;
        default: break;
        }
    }
    ev->cat_kind = ev->has_cat_iid ? 1 : ev->has_cat_str ? 2 : 0;
    return k;
}

/* The flow ids of field `num` (flow_ids or terminating_flow_ids) of a TrackEvent, appended to out. */
static int event_flows(const uint8_t *s, size_t n, uint32_t num, Buf *out) {
    Rd r = {s, s + n};
    Fld f;
    int k;
    while ((k = rd_field(&r, &f)) > 0) {
        if (FNUM(f) != num) continue;
        if (FWT(f) == WT_I64 && buf_put(out, &f.v, 8)) return -2;
        if (FWT(f) == WT_LEN && buf_put(out, f.s, f.n)) return -2;  /* packed fixed64, little-endian */
    }
    return k;
}
