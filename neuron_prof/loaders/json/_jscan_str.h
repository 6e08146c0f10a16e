/* Strings and whitespace for the compiled trace scanner (_jscan_json.h, _jscan.c): the cursor, skipping
 * whitespace, finding a string's end (16 bytes at a time with SSE2, always there on x86-64, with gcc or
 * clang; 8 at a time elsewhere) while validating it, and decoding its escapes. No Python API: the scan runs without the GIL. */

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#define JSCAN_SSE2 1
#endif

/* ---- the cursor ----------------------------------------------------------------------------------- */
enum { S_OK = 0, S_BAD = 1, S_PHASE = 2, S_NOMEM = 3 };

typedef struct { const uint8_t *base, *p, *end; } Cur;

static const uint8_t IS_WS[256] = {[' '] = 1, ['\n'] = 1, ['\r'] = 1, ['\t'] = 1};

static inline void ws(Cur *c) {
    const uint8_t *p = c->p, *end = c->end;
    while (p < end && IS_WS[*p]) p++;
    c->p = p;
}

static int hexval(uint8_t h) {
    if (h >= '0' && h <= '9') return h - '0';
    if (h >= 'a' && h <= 'f') return h - 'a' + 10;
    if (h >= 'A' && h <= 'F') return h - 'A' + 10;
    return -1;
}

static int hex4(const uint8_t *p, const uint8_t *end) {
    if (end - p < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) { int h = hexval(p[i]); if (h < 0) return -1; v = v * 16 + h; }
    return v;
}

/* Length of the valid UTF-8 sequence at p (2-4), or 0 (overlong, surrogate, beyond U+10FFFF, cut). */
static int utf8_len(const uint8_t *p, const uint8_t *end) {
    uint8_t c = p[0];
    if (c >= 0xc2 && c <= 0xdf) return end - p >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (end - p < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80) return 0;
        if (c == 0xe0 && p[1] < 0xa0) return 0;
        if (c == 0xed && p[1] >= 0xa0) return 0;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (end - p < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80) return 0;
        if (c == 0xf0 && p[1] < 0x90) return 0;
        if (c == 0xf4 && p[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

/* p advanced over plain string bytes (printable ASCII but '"' and '\\'), up to end. */
static inline const uint8_t *plain_run(const uint8_t *p, const uint8_t *end) {
#ifdef JSCAN_SSE2
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        /* signed: bytes below 0x20 and from 0x80 (non-ASCII) are both "less than" 0x20 */
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                 _mm_cmplt_epi8(v, space));
        int bits = _mm_movemask_epi8(m);
        if (bits) return p + __builtin_ctz((unsigned)bits);
        p += 16;
    }
#else
    while (end - p >= 8) {  /* 8 bytes at a time: stop at '"', '\\', a control byte or non-ASCII */
        uint64_t w, q, b;
        memcpy(&w, p, 8);
        q = w ^ 0x2222222222222222ULL;
        b = w ^ 0x5c5c5c5c5c5c5c5cULL;
        uint64_t stop = (w | ((w - 0x2020202020202020ULL) & ~w) | ((q - 0x0101010101010101ULL) & ~q)
                         | ((b - 0x0101010101010101ULL) & ~b)) & 0x8080808080808080ULL;
        if (stop) break;
        p += 8;
    }
#endif
    while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
    return p;
}

/* The closing quote of the string whose text starts at p (after its opening quote), or NULL when the
 * string is invalid or not closed before end; *esc: whether it holds an escape. */
static const uint8_t *string_end(const uint8_t *p, const uint8_t *end, int *esc) {
    *esc = 0;
    for (;;) {
        p = plain_run(p, end);
        if (p >= end) return NULL;
        uint8_t ch = *p;
        if (ch == '"') return p;
        if (ch == '\\') {
            *esc = 1;
            if (end - p < 2) return NULL;
            uint8_t e = p[1];
            if (e == 'u') {
                int v = hex4(p + 2, end);
                if (v < 0) return NULL;
                if (v >= 0xdc00 && v <= 0xdfff) return NULL;  /* a lone low surrogate */
                if (v >= 0xd800 && v <= 0xdbff) {
                    if (end - p < 12 || p[6] != '\\' || p[7] != 'u') return NULL;
                    int lo = hex4(p + 8, end);
                    if (lo < 0xdc00 || lo > 0xdfff) return NULL;
                    p += 12;
                } else {
                    p += 6;
                }
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
            } else {
                return NULL;
            }
        } else if (ch < 0x20) {
            return NULL;  /* a raw control character: the Python reader repairs it */
        } else {
            int k = utf8_len(p, end);
            if (!k) return NULL;
            p += k;
        }
    }
}

/* A string at c->p (its opening quote). Sets *off and *len to the text between the quotes (offsets from
 * base) and *esc when it holds an escape. */
static int scan_string(Cur *c, size_t *off, size_t *len, int *esc) {
    const uint8_t *q = string_end(c->p + 1, c->end, esc);
    if (!q) return S_BAD;
    *off = (size_t)(c->p + 1 - c->base);
    *len = (size_t)(q - (c->p + 1));
    c->p = q + 1;
    return S_OK;
}

/* Decode a validated string span with escapes into out (UTF-8); returns the decoded length. out must
 * hold len bytes (decoding never grows the text). */
static size_t unescape(const uint8_t *s, size_t len, uint8_t *out) {
    const uint8_t *end = s + len;
    uint8_t *o = out;
    while (s < end) {
        if (*s != '\\') { *o++ = *s++; continue; }
        uint8_t e = s[1];
        if (e != 'u') {
            *o++ = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
            s += 2;
            continue;
        }
        uint32_t v = (uint32_t)hex4(s + 2, end);
        s += 6;
        if (v >= 0xd800 && v <= 0xdbff) {
            v = 0x10000 + ((v - 0xd800) << 10) + ((uint32_t)hex4(s + 2, end) - 0xdc00);
            s += 6;
        }
        if (v < 0x80) { *o++ = (uint8_t)v; }
        else if (v < 0x800) { *o++ = 0xc0 | (v >> 6); *o++ = 0x80 | (v & 0x3f); }
        else if (v < 0x10000) { *o++ = 0xe0 | (v >> 12); *o++ = 0x80 | ((v >> 6) & 0x3f); *o++ = 0x80 | (v & 0x3f); }
        else {
            *o++ = 0xf0 | (v >> 18); *o++ = 0x80 | ((v >> 12) & 0x3f);
            *o++ = 0x80 | ((v >> 6) & 0x3f); *o++ = 0x80 | (v & 0x3f);
        }
    }
    return (size_t)(o - out);
}
