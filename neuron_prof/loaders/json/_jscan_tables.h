/* Growable buffers and hash tables of the compiled trace scanner (_jscan.c): keys of KEYW int64 words, and
 * string spans of the scanned buffer, each to dense ids in order of insertion. No Python API. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable buffer --------------------------------------------------------------------------- */
typedef struct { uint8_t *d; size_t n, cap; } Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->n + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra) cap *= 2;
    uint8_t *d = (uint8_t *)realloc(b->d, cap);
    if (!d) return -1;
    b->d = d;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *v, size_t len) {
    if (buf_reserve(b, len)) return -1;
    memcpy(b->d + b->n, v, len);
    b->n += len;
    return 0;
}

#define PUT(b, T, v) do {                                                              \
        if ((b)->n + sizeof(T) > (b)->cap && buf_reserve((b), sizeof(T))) return S_NOMEM; \
        T _v = (v);                                                                     \
        memcpy((b)->d + (b)->n, &_v, sizeof(T));                                        \
        (b)->n += sizeof(T);                                                            \
    } while (0)

/* ---- a hash table of keys of K int64 words -> dense ids in order of insertion ---------------------- */
#define KEYW 4
typedef struct { int64_t *keys; int32_t *slots; size_t n, cap, nslots; } KeyTab;

static uint64_t mix64(uint64_t h) {
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 33;
    return h;
}

static uint64_t key_hash(const int64_t *k) {
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < KEYW; i++) h = mix64(h ^ (uint64_t)k[i]) + (uint64_t)i;
    return h;
}

static int keytab_grow(KeyTab *t) {
    size_t ns = t->nslots ? t->nslots * 2 : 256;
    int32_t *slots = (int32_t *)malloc(ns * sizeof(int32_t));
    if (!slots) return -1;
    memset(slots, 0xff, ns * sizeof(int32_t));
    for (size_t i = 0; i < t->n; i++) {
        size_t j = key_hash(t->keys + i * KEYW) & (ns - 1);
        while (slots[j] >= 0) j = (j + 1) & (ns - 1);
        slots[j] = (int32_t)i;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

/* The id of key k (added if new), or -1 when out of memory. */
static int32_t keytab_id(KeyTab *t, const int64_t *k) {
    if ((t->n + 1) * 2 > t->nslots && keytab_grow(t)) return -1;
    size_t j = key_hash(k) & (t->nslots - 1);
    while (t->slots[j] >= 0) {
        if (!memcmp(t->keys + (size_t)t->slots[j] * KEYW, k, KEYW * sizeof(int64_t))) return t->slots[j];
        j = (j + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        int64_t *keys = (int64_t *)realloc(t->keys, cap * KEYW * sizeof(int64_t));
        if (!keys) return -1;
        t->keys = keys;
        t->cap = cap;
    }
    memcpy(t->keys + t->n * KEYW, k, KEYW * sizeof(int64_t));
    t->slots[j] = (int32_t)t->n;
    return (int32_t)t->n++;
}

static void keytab_free(KeyTab *t) { free(t->keys); free(t->slots); }

/* ---- strings ------------------------------------------------------------------------------------ */
/* A string table: raw spans (between the quotes) -> dense ids; `esc` says whether the span has escapes. */
typedef struct { size_t off; uint32_t len; uint8_t esc; } Span;
typedef struct { Span *spans; int32_t *slots; size_t n, cap, nslots; const uint8_t *base; } StrTab;

static uint64_t bytes_hash(const uint8_t *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    while (n >= 8) { uint64_t w; memcpy(&w, s, 8); h = (h ^ w) * 0x100000001b3ULL; h ^= h >> 29; s += 8; n -= 8; }
    while (n--) h = (h ^ *s++) * 0x100000001b3ULL;
    return mix64(h);
}

static int strtab_grow(StrTab *t) {
    size_t ns = t->nslots ? t->nslots * 2 : 1024;
    int32_t *slots = (int32_t *)malloc(ns * sizeof(int32_t));
    if (!slots) return -1;
    memset(slots, 0xff, ns * sizeof(int32_t));
    for (size_t i = 0; i < t->n; i++) {
        size_t j = bytes_hash(t->base + t->spans[i].off, t->spans[i].len) & (ns - 1);
        while (slots[j] >= 0) j = (j + 1) & (ns - 1);
        slots[j] = (int32_t)i;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

static int32_t strtab_id(StrTab *t, size_t off, size_t len, int esc) {
    if ((t->n + 1) * 2 > t->nslots && strtab_grow(t)) return -1;
    const uint8_t *s = t->base + off;
    size_t j = bytes_hash(s, len) & (t->nslots - 1);
    while (t->slots[j] >= 0) {
        Span *sp = &t->spans[t->slots[j]];
        if (sp->len == len && !memcmp(t->base + sp->off, s, len)) return t->slots[j];
        j = (j + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        Span *spans = (Span *)realloc(t->spans, cap * sizeof(Span));
        if (!spans) return -1;
        t->spans = spans;
        t->cap = cap;
    }
    t->spans[t->n].off = off;
    t->spans[t->n].len = (uint32_t)len;
    t->spans[t->n].esc = (uint8_t)esc;
    t->slots[j] = (int32_t)t->n;
    return (int32_t)t->n++;
}

static void strtab_free(StrTab *t) { free(t->spans); free(t->slots); }

