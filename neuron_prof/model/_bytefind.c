/* neuron_prof.model._bytefind: where a byte string occurs in a buffer, at C speed (glibc's memmem).
 *
 * find_all(buffer, text) -> bytes: the positions (native int64, ascending) where `text` occurs in `buffer`, not
 * overlapping: where a `find` loop that steps past each hit finds them. The buffer is any contiguous object with
 * the buffer protocol (bytes, a memory-mapped file, a uint8 numpy view); the GIL is released while it searches.
 * The numpy path in _args.py (`positions`) gives the same answer when this module is not built. */
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

static PyMethodDef methods[] = {
    {"find_all", find_all, METH_VARARGS, "find_all(buffer, text) -> bytes of int64 positions, not overlapping"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bytefind", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bytefind(void) { return PyModule_Create(&module); }
