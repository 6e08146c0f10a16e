/* JSON tokens for the compiled trace scanner (_jscan.c): strings, numbers, skipping a value, and copying an
 * args object without whitespace.
 *
 * Everything here is strict: a byte the JSON grammar does not allow, a control character or invalid UTF-8
 * inside a string, a lone surrogate escape, nesting deeper than MAX_DEPTH make the caller refuse the chunk,
 * which the Python loader then reads its own way (with its repairs and warnings). No Python API is used:
 * the scan runs with the GIL released. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__GLIBC__) || defined(__APPLE__)
#include <locale.h>
#endif
#ifdef __APPLE__
#include <xlocale.h>
#endif

#define MAX_DEPTH 200

#include "_jscan_tables.h"

/* ---- the cursor ----------------------------------------------------------------------------------- */
enum { S_OK = 0, S_BAD = 1, S_PHASE = 2, S_NOMEM = 3 };

typedef struct { const uint8_t *base, *p, *end; } Cur;

static inline void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
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

/* A string at c->p (its opening quote). Sets *off and *len to the text between the quotes (offsets from
 * base) and *esc when it holds an escape. */
static int scan_string(Cur *c, size_t *off, size_t *len, int *esc) {
    const uint8_t *p = c->p + 1, *end = c->end;
    *esc = 0;
    for (;;) {
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
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
        if (p >= end) return S_BAD;
        uint8_t ch = *p;
        if (ch == '"') break;
        if (ch == '\\') {
            *esc = 1;
            if (end - p < 2) return S_BAD;
            uint8_t e = p[1];
            if (e == 'u') {
                int v = hex4(p + 2, end);
                if (v < 0) return S_BAD;
                if (v >= 0xdc00 && v <= 0xdfff) return S_BAD;  /* a lone low surrogate */
                if (v >= 0xd800 && v <= 0xdbff) {
                    if (end - p < 12 || p[6] != '\\' || p[7] != 'u') return S_BAD;
                    int lo = hex4(p + 8, end);
                    if (lo < 0xdc00 || lo > 0xdfff) return S_BAD;
                    p += 12;
                } else {
                    p += 6;
                }
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
            } else {
                return S_BAD;
            }
        } else if (ch < 0x20) {
            return S_BAD;  /* a raw control character: the Python reader repairs it */
        } else {
            int k = utf8_len(p, end);
            if (!k) return S_BAD;
            p += k;
        }
    }
    *off = (size_t)(c->p + 1 - c->base);
    *len = (size_t)(p - (c->p + 1));
    c->p = p + 1;
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

/* ---- numbers -------------------------------------------------------------------------------------- */
typedef struct {
    const uint8_t *start, *end;
    int neg, has_frac, has_exp;
    int int_digits, frac_digits, sig;    /* sig: significant digits (from the first non-zero one) */
    int lead_frac_zeros;                 /* zeros right after the point when the integer part is 0 */
    uint64_t mant;                       /* the first 19 significant digits */
    int exp10;                           /* value = mant * 10^exp10 when sig <= 19 */
    int last_frac_zero;
} Num;

static int scan_number(Cur *c, Num *n) {
    const uint8_t *p = c->p, *end = c->end;
    memset(n, 0, sizeof(*n));
    n->start = p;
    if (p < end && *p == '-') { n->neg = 1; p++; }
    if (p >= end || *p < '0' || *p > '9') return S_BAD;
    int dropped = 0;  /* significant digits beyond 19 */
    if (*p == '0') {
        p++;
        n->int_digits = 1;
        if (p < end && *p >= '0' && *p <= '9') return S_BAD;  /* a leading zero */
    } else {
        while (p < end && *p >= '0' && *p <= '9') {
            if (n->sig < 19) { n->mant = n->mant * 10 + (*p - '0'); n->sig++; } else { dropped++; n->sig++; }
            n->int_digits++;
            p++;
        }
    }
    n->exp10 = dropped;
    if (p < end && *p == '.') {
        n->has_frac = 1;
        p++;
        if (p >= end || *p < '0' || *p > '9') return S_BAD;
        int leading = n->sig == 0;
        while (p < end && *p >= '0' && *p <= '9') {
            int d = *p - '0';
            if (leading && d == 0) { n->lead_frac_zeros++; n->exp10--; }
            else {
                leading = 0;
                if (n->sig < 19) { n->mant = n->mant * 10 + d; n->sig++; n->exp10--; } else { n->sig++; }
            }
            n->last_frac_zero = d == 0;
            n->frac_digits++;
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        n->has_exp = 1;
        p++;
        int eneg = 0, e = 0;
        if (p < end && (*p == '+' || *p == '-')) { eneg = *p == '-'; p++; }
        if (p >= end || *p < '0' || *p > '9') return S_BAD;
        while (p < end && *p >= '0' && *p <= '9') { if (e < 100000) e = e * 10 + (*p - '0'); p++; }
        n->exp10 += eneg ? -e : e;
    }
    n->end = p;
    c->p = p;
    return S_OK;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The double nearest to the literal (correctly rounded: exact arithmetic or strtod in the C locale). */
static double num_double(const Num *n) {
    if (n->sig <= 19 && n->mant <= (1ULL << 53) && n->exp10 >= -22 && n->exp10 <= 22) {
        double m = (double)n->mant;
        double v = n->exp10 >= 0 ? m * POW10[n->exp10] : m / POW10[-n->exp10];
        return n->neg ? -v : v;
    }
    char tmp[128];
    size_t len = (size_t)(n->end - n->start);
    char *s = len < sizeof(tmp) ? tmp : (char *)malloc(len + 1);
    if (!s) return NAN;
    memcpy(s, n->start, len);
    s[len] = 0;
#if defined(__GLIBC__) || defined(__APPLE__)
    static locale_t c_locale = (locale_t)0;
    if (!c_locale) c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    double v = c_locale ? strtod_l(s, NULL, c_locale) : strtod(s, NULL);
#else
    double v = strtod(s, NULL);
#endif
    if (s != tmp) free(s);
    return v;
}

/* An integer literal that fits int64 (no fraction or exponent). */
static int num_int64(const Num *n, int64_t *out) {
    if (n->has_frac || n->has_exp || n->sig > 19 || n->exp10 != 0) return S_BAD;
    if (n->neg) {
        if (n->mant > (1ULL << 63)) return S_BAD;
        *out = n->mant == (1ULL << 63) ? INT64_MIN : -(int64_t)n->mant;
    } else {
        if (n->mant > (uint64_t)INT64_MAX) return S_BAD;
        *out = (int64_t)n->mant;
    }
    return S_OK;
}

/* Whether orjson writes the number exactly as the literal (else its args are re-serialised by orjson):
 * integers of up to 18 digits but "-0"; decimals without exponent of at most 15 significant digits, no
 * trailing zero after the point but "x.0", and at most 3 zeros after "0." (orjson's own writing). */
static int num_canonical(const Num *n) {
    if (n->has_exp) return 0;
    if (!n->has_frac) return n->int_digits <= 18 && !(n->neg && n->mant == 0);
    if (n->sig > 15 || n->int_digits > 15) return 0;
    if (n->last_frac_zero && n->frac_digits != 1) return 0;
    if (n->mant == 0) return n->frac_digits == 1;  /* 0.0 and -0.0 */
    return n->lead_frac_zeros <= 3;
}

/* ---- skip or copy a value ------------------------------------------------------------------------- */
static int lit(Cur *c, const char *w, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n)) return S_BAD;
    c->p += n;
    return S_OK;
}

/* Validate and step over one value. With out != NULL, copy it there without whitespace; with redo != NULL,
 * set *redo when orjson would write it differently (an escape in a string, a non-canonical number). */
static int value(Cur *c, Buf *out, int *redo, int depth) {
    if (depth > MAX_DEPTH) return S_BAD;
    ws(c);
    if (c->p >= c->end) return S_BAD;
    uint8_t ch = *c->p;
    int r;
    if (ch == '"') {
        size_t off, len;
        int esc;
        const uint8_t *s0 = c->p;
        if ((r = scan_string(c, &off, &len, &esc))) return r;
        if (esc && redo) *redo = 1;
        if (out && buf_put(out, s0, (size_t)(c->p - s0))) return S_NOMEM;
        return S_OK;
    }
    if (ch == '{' || ch == '[') {
        uint8_t close = ch == '{' ? '}' : ']';
        c->p++;
        if (out && buf_put(out, &ch, 1)) return S_NOMEM;
        ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return out && buf_put(out, &close, 1) ? S_NOMEM : S_OK;
        }
        for (;;) {
            if (ch == '{') {
                ws(c);
                if (c->p >= c->end || *c->p != '"') return S_BAD;
                if ((r = value(c, out, redo, depth + 1))) return r;
                ws(c);
                if (c->p >= c->end || *c->p != ':') return S_BAD;
                c->p++;
                if (out && buf_put(out, ":", 1)) return S_NOMEM;
            }
            if ((r = value(c, out, redo, depth + 1))) return r;
            ws(c);
            if (c->p >= c->end) return S_BAD;
            if (*c->p == ',') {
                c->p++;
                if (out && buf_put(out, ",", 1)) return S_NOMEM;
                continue;
            }
            if (*c->p != close) return S_BAD;
            c->p++;
            return out && buf_put(out, &close, 1) ? S_NOMEM : S_OK;
        }
    }
    const uint8_t *s0 = c->p;
    if (ch == 't') r = lit(c, "true", 4);
    else if (ch == 'f') r = lit(c, "false", 5);
    else if (ch == 'n') r = lit(c, "null", 4);
    else {
        Num n;
        if ((r = scan_number(c, &n))) return r;
        if (redo && !num_canonical(&n)) *redo = 1;
    }
    if (r) return r;
    return out && buf_put(out, s0, (size_t)(c->p - s0)) ? S_NOMEM : S_OK;
}

/* Copy a validated value (s..e) to out without the whitespace outside its strings. */
static int squeeze(const uint8_t *s, const uint8_t *e, Buf *out) {
    if (buf_reserve(out, (size_t)(e - s))) return S_NOMEM;
    uint8_t *o = out->d + out->n;
    while (s < e) {
        const uint8_t *r = s;
        while (r < e && *r != '"' && *r != ' ' && *r != '\n' && *r != '\r' && *r != '\t') r++;
        memcpy(o, s, (size_t)(r - s));
        o += r - s;
        s = r;
        if (s >= e) break;
        if (*s != '"') { s++; continue; }
        r = s + 1;  /* a string: copied as it is, up to its closing quote */
        for (;;) {
            while (e - r >= 8) {
                uint64_t w, q, b;
                memcpy(&w, r, 8);
                q = w ^ 0x2222222222222222ULL;
                b = w ^ 0x5c5c5c5c5c5c5c5cULL;
                if ((((q - 0x0101010101010101ULL) & ~q) | ((b - 0x0101010101010101ULL) & ~b)) & 0x8080808080808080ULL)
                    break;
                r += 8;
            }
            while (*r != '"' && *r != '\\') r++;
            if (*r == '\\') { r += 2; continue; }
            break;
        }
        r++;
        memcpy(o, s, (size_t)(r - s));
        o += r - s;
        s = r;
    }
    out->n = (size_t)(o - out->d);
    return S_OK;
}
