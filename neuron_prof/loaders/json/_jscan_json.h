/* JSON values for the compiled trace scanner (_jscan.c): numbers, skipping a value, and copying an args
 * object without whitespace in the same pass that validates it (strings: _jscan_str.h).
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
#include "_jscan_str.h"

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

/* ---- skip or copy a value ------------------------------------------------------------------------- */
static int lit(Cur *c, const char *w, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n)) return S_BAD;
    c->p += n;
    return S_OK;
}

#define DIGIT(ch) ((uint8_t)((ch) - '0') < 10)

/* Validate a number at c->p and step over it; *canon: whether orjson writes it exactly as the literal
 * (num_canonical's rule, without computing the value). */
static int skip_number(Cur *c, int *canon) {
    const uint8_t *p = c->p, *end = c->end;
    int neg = 0, ok;
    if (p < end && *p == '-') { neg = 1; p++; }
    if (p >= end || !DIGIT(*p)) return S_BAD;
    const uint8_t *i0 = p;
    int int_zero = *p == '0';
    if (int_zero) {
        p++;
        if (p < end && DIGIT(*p)) return S_BAD;  /* a leading zero */
    } else {
        while (p < end && DIGIT(*p)) p++;
    }
    int intd = (int)(p - i0);
    if (p < end && *p == '.') {
        const uint8_t *f0 = ++p;
        while (p < end && *p == '0') p++;
        int lz = (int)(p - f0);  /* zeros right after the point */
        while (p < end && DIGIT(*p)) p++;
        int fd = (int)(p - f0);
        if (!fd) return S_BAD;
        int sig = int_zero ? fd - lz : intd + fd;
        if (sig > 15 || intd > 15) ok = 0;
        else if (p[-1] == '0' && fd != 1) ok = 0;
        else if (int_zero && lz == fd) ok = fd == 1;  /* 0.0 and -0.0 */
        else ok = !int_zero || lz <= 3;
    } else {
        ok = intd <= 18 && !(neg && int_zero);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !DIGIT(*p)) return S_BAD;
        while (p < end && DIGIT(*p)) p++;
        ok = 0;
    }
    c->p = p;
    *canon = ok;
    return S_OK;
}

/* A number for a float field (msgspec's `float`: any JSON number; the result must be finite). */
static int field_double(Cur *c, double *out) {
    /* [-]digits[.digits] of at most 19 digits in all (timestamps, durations): exact when the digits fit 53
     * bits, as one correctly rounded division; anything else the general way */
    const uint8_t *p = c->p, *end = c->end;
    int neg = p < end && *p == '-';
    p += neg;
    const uint8_t *d0 = p;
    uint64_t m = 0;
    while (p < end && DIGIT(*p) && p - d0 < 20) m = m * 10 + (uint64_t)(*p++ - '0');
    ptrdiff_t intd = p - d0, fd = 0;
    if (p < end && *p == '.') {
        const uint8_t *f0 = ++p;
        while (p < end && DIGIT(*p) && intd + (p - f0) < 20) m = m * 10 + (uint64_t)(*p++ - '0');
        fd = p - f0;
        if (!fd) return S_BAD;
    }
    if (intd && !(intd > 1 && *d0 == '0') && intd + fd <= 19 && m <= (1ULL << 53)
        && !(p < end && (DIGIT(*p) || *p == 'e' || *p == 'E'))) {
        double v = (double)m / POW10[fd];
        *out = neg ? -v : v;
        c->p = p;
        return S_OK;
    }
    Num n;
    if (c->p >= c->end || !(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return S_BAD;
    if (scan_number(c, &n)) return S_BAD;
    *out = num_double(&n);
    return isfinite(*out) ? S_OK : S_BAD;
}

/* A literal or a number at c->p (anything but a string, object or array); *canon as skip_number. */
static int scalar(Cur *c, int *canon) {
    uint8_t ch = *c->p;
    *canon = 1;
    if (ch == 't') return lit(c, "true", 4);
    if (ch == 'f') return lit(c, "false", 5);
    if (ch == 'n') return lit(c, "null", 4);
    return skip_number(c, canon);
}

/* Validate and step over one value. */
static int skip_value(Cur *c, int depth) {
    if (depth > MAX_DEPTH) return S_BAD;
    ws(c);
    if (c->p >= c->end) return S_BAD;
    uint8_t ch = *c->p;
    int r, esc;
    if (ch == '"') {
        const uint8_t *q = string_end(c->p + 1, c->end, &esc);
        if (!q) return S_BAD;
        c->p = q + 1;
        return S_OK;
    }
    if (ch == '{' || ch == '[') {
        uint8_t close = (uint8_t)(ch + 2);  /* '}' and ']' */
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == close) { c->p++; return S_OK; }
        for (;;) {
            if (ch == '{') {
                ws(c);
                if (c->p >= c->end || *c->p != '"') return S_BAD;
                const uint8_t *q = string_end(c->p + 1, c->end, &esc);
                if (!q) return S_BAD;
                c->p = q + 1;
                ws(c);
                if (c->p >= c->end || *c->p != ':') return S_BAD;
                c->p++;
            }
            if ((r = skip_value(c, depth + 1))) return r;
            ws(c);
            if (c->p >= c->end) return S_BAD;
            if (*c->p == ',') { c->p++; continue; }
            if (*c->p != close) return S_BAD;
            c->p++;
            return S_OK;
        }
    }
    return scalar(c, &esc);
}

/* A string at c->p copied to *o as it is (quotes included); *redo set when it holds an escape. Plain ASCII
 * is copied 16 bytes at a time as it is scanned: *o has room for the rest of the piece and 16 bytes more. */
static int copy_string(Cur *c, uint8_t **out, int *redo) {
    const uint8_t *p = c->p + 1, *end = c->end;
    uint8_t *o = *out;
    *o++ = '"';
#ifdef JSCAN_SSE2
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        _mm_storeu_si128((__m128i *)o, v);
        int bits = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                                  _mm_cmplt_epi8(v, space)));
        if (bits) {
            int k = __builtin_ctz((unsigned)bits);
            p += k;
            o += k;
            break;
        }
        p += 16;
        o += 16;
    }
#endif
    int esc = 0;
    const uint8_t *q = p < end && *p == '"' ? p : string_end(p, end, &esc);
    if (!q) return S_BAD;
    size_t n = (size_t)(q + 1 - p);
    memcpy(o, p, n);
    *out = o + n;
    c->p = q + 1;
    if (esc) *redo = 1;
    return S_OK;
}

/* Validate one value and copy it to *o without the whitespace outside its strings, in one pass. *o must
 * have room for the value's text (the copy is never longer). *redo is set when orjson would write the value
 * differently (an escape in a string, a non-canonical number). */
static int copy_value(Cur *c, uint8_t **o, int *redo, int depth) {
    if (depth > MAX_DEPTH) return S_BAD;
    ws(c);
    if (c->p >= c->end) return S_BAD;
    uint8_t ch = *c->p;
    int r;
    if (ch == '"') return copy_string(c, o, redo);
    if (ch == '{' || ch == '[') {
        uint8_t close = (uint8_t)(ch + 2);
        c->p++;
        *(*o)++ = ch;
        ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            *(*o)++ = close;
            return S_OK;
        }
        for (;;) {
            if (ch == '{') {
                ws(c);
                if (c->p >= c->end || *c->p != '"') return S_BAD;
                if ((r = copy_string(c, o, redo))) return r;
                ws(c);
                if (c->p >= c->end || *c->p != ':') return S_BAD;
                c->p++;
                *(*o)++ = ':';
            }
            if ((r = copy_value(c, o, redo, depth + 1))) return r;
            ws(c);
            if (c->p >= c->end) return S_BAD;
            if (*c->p == ',') {
                c->p++;
                *(*o)++ = ',';
                continue;
            }
            if (*c->p != close) return S_BAD;
            c->p++;
            *(*o)++ = close;
            return S_OK;
        }
    }
    const uint8_t *s0 = c->p;
    int canon;
    if ((r = scalar(c, &canon))) return r;
    if (!canon) *redo = 1;
    size_t n = (size_t)(c->p - s0);
    memcpy(*o, s0, n);
    *o += n;
    return S_OK;
}
