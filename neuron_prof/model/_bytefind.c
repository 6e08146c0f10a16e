/* neuron_prof.model._bytefind: where a byte string occurs in a buffer, at C speed (glibc's memmem).
 *
 * find_all(buffer, text) -> bytes: the positions (native int64, ascending) where `text` occurs in `buffer`, not
 * overlapping: where a `find` loop that steps past each hit finds them. The buffer is any contiguous object with
 * the buffer protocol (bytes, a memory-mapped file, a uint8 numpy view); the GIL is released while it searches.
 * The numpy path in _args.py (`positions`) gives the same answer when this module is not built.
 *
 * ints_after(buffer, positions, width, undecided, ok, values): writes per int64 position (into the writable
 * buffers `ok`, one byte each, and `values`, int64) whether
 * `\s*:\s*(-?\d+)` matches there, read for at most `width` bytes (a byte past the end reads as 0), and its
 * integer; a position those bytes do not decide is not OK with value `undecided`, one that fails has 0. The same
 * state machine as _args.py's `_ints_after`, a position at a time instead of a byte column at a time. */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *find_all(PyObject *self, PyObject *args) {
    Py_buffer hay, text;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*", &hay, &text)) return NULL;
    const char *h = hay.buf, *t = text.buf;
    size_t hl = (size_t)hay.len, tl = (size_t)text.len;
    size_t cap = 1024, cnt = 0;
    int failed = 0;
    int64_t *out = PyMem_RawMalloc(cap * sizeof(int64_t));
    if (out == NULL) failed = 1;
    if (!failed && tl > 0) {
        Py_BEGIN_ALLOW_THREADS
        const char *p = h, *end = h + hl;
        while ((size_t)(end - p) >= tl) {
            const char *q = memmem(p, (size_t)(end - p), t, tl);
            if (q == NULL) break;
            if (cnt == cap) {
                int64_t *grown = PyMem_RawRealloc(out, 2 * cap * sizeof(int64_t));
                if (grown == NULL) { failed = 1; break; }
                out = grown;
                cap *= 2;
            }
            out[cnt++] = (int64_t)(q - h);
            p = q + tl;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&hay);
    PyBuffer_Release(&text);
    if (failed) {
        PyMem_RawFree(out);
        return PyErr_NoMemory();
    }
    PyObject *r = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(cnt * sizeof(int64_t)));
    PyMem_RawFree(out);
    return r;
}


enum { BEFORE, AFTER_COLON, AFTER_SIGN, DIGITS, OK, FAIL };

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static PyObject *ints_after(PyObject *self, PyObject *args) {
    Py_buffer data, at, okb, valb;
    Py_ssize_t width;
    long long undecided;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*nLw*w*", &data, &at, &width, &undecided, &okb, &valb)) return NULL;
    Py_ssize_t n = at.len / (Py_ssize_t)sizeof(int64_t);
    if (okb.len < n || valb.len < n * (Py_ssize_t)sizeof(int64_t)) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&at);
        PyBuffer_Release(&okb);
        PyBuffer_Release(&valb);
        PyErr_SetString(PyExc_ValueError, "ints_after: the output buffers are shorter than the positions");
        return NULL;
    }
    const unsigned char *d = data.buf;
    const int64_t *pos = at.buf;
    char *o = okb.buf;
    int64_t *v = valb.buf;
    int64_t len = (int64_t)data.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int state = BEFORE, neg = 0;
        int64_t x = 0;
        for (Py_ssize_t j = 0; j < width && state < OK; j++) {
            int64_t ix = pos[i] + j;
            unsigned char c = (ix >= 0 && ix < len) ? d[ix] : 0;
            int digit = c >= '0' && c <= '9';
            if (state <= AFTER_COLON && is_space(c)) continue;
            if (state == BEFORE && c == ':') state = AFTER_COLON;
            else if (state == AFTER_COLON && c == '-') { state = AFTER_SIGN; neg = 1; }
            else if (state >= AFTER_COLON && digit) { state = DIGITS; x = x * 10 + (c - '0'); }
            else if (state == DIGITS) state = OK;
            else state = FAIL;
        }
        o[i] = state == OK;
        v[i] = state == OK ? (neg ? -x : x) : state == FAIL ? 0 : (int64_t)undecided;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&at);
    PyBuffer_Release(&okb);
    PyBuffer_Release(&valb);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"find_all", find_all, METH_VARARGS, "find_all(buffer, text) -> bytes of int64 positions, not overlapping"},
    {"ints_after", ints_after, METH_VARARGS,
     "ints_after(buffer, positions, width, undecided, ok, values): the integers after JSON keys"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bytefind", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bytefind(void) { return PyModule_Create(&module); }
