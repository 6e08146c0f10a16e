/* Python objects of a finished scan (_jscan.c): its columns as bytes, its strings as a list of str, its key
 * tables and orders of first use. Called with the GIL held; included by _jscan.c after the Scan struct. */

static PyObject *bytes_of(const Buf *b) { return PyBytes_FromStringAndSize((const char *)b->d, (Py_ssize_t)b->n); }

/* The strings of the table as a list of str. */
static PyObject *strings_of(const StrTab *t) {
    PyObject *out = PyList_New((Py_ssize_t)t->n);
    if (!out) return NULL;
    uint8_t *tmp = NULL;
    size_t tmp_cap = 0;
    for (size_t i = 0; i < t->n; i++) {
        const Span *sp = &t->spans[i];
        const uint8_t *s = t->base + sp->off;
        size_t len = sp->len;
        if (sp->esc) {
            if (tmp_cap < len) {
                free(tmp);
                tmp_cap = len;
                if (!(tmp = (uint8_t *)malloc(tmp_cap))) { Py_DECREF(out); return PyErr_NoMemory(); }
            }
            len = unescape(s, len, tmp);
            s = tmp;
        }
        PyObject *u = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)len, "strict");
        if (!u) { free(tmp); Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, (Py_ssize_t)i, u);
    }
    free(tmp);
    return out;
}

static PyObject *keys_of(const KeyTab *t) {
    return PyBytes_FromStringAndSize((const char *)t->keys, (Py_ssize_t)(t->n * KEYW * sizeof(int64_t)));
}

/* ((track, name, cat, flow key) orders of X, of flows, of instants), as bytes of int32. */
static PyObject *orders_of(const Scan *s) {
    PyObject *out = PyTuple_New(3);
    if (!out) return NULL;
    for (int g = 0; g < 3; g++) {
        PyObject *t = Py_BuildValue("(NNNN)", bytes_of(&s->order[g][0]), bytes_of(&s->order[g][1]),
                                    bytes_of(&s->order[g][2]), bytes_of(&s->order[g][3]));
        if (!t) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, g, t);
    }
    return out;
}
