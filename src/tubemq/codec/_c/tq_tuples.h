/* NamedTuple instances, presized dicts and ASCII str built without Python-level calls.
   Part of tubemq.codec.compiled (included by compiled.pyx through `cdef extern from`). */
#ifndef TUBEMQ_TQ_TUPLES_H
#define TUBEMQ_TQ_TUPLES_H

#include <Python.h>

/* A NamedTuple instance without running its Python-level __new__. The fast form allocates the
   subtype instance and copies the items (what tuple_subtype_new does); it is switched on only after
   a start-up self-check proved it gives the same object as the documented tp_new path. */
static int tq_nt_fast = 0;
/* CPython versions whose tuple layout (no hash cache) and GC allocation this file relies on */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(PYPY_VERSION) \
    && !defined(Py_LIMITED_API) && !defined(Py_GIL_DISABLED)
#define TQ_GC_NEWVAR_OK 1
#else
#define TQ_GC_NEWVAR_OK 0
#endif
static PyObject *tq_nt_slow(PyObject *cls, PyObject *fields) {
    PyObject *args = PyTuple_Pack(1, fields), *r;
    if (args == NULL) return NULL;
    r = PyTuple_Type.tp_new((PyTypeObject *)cls, args, NULL);
    Py_DECREF(args);
    return r;
}
/* the instance straight from n borrowed items: one allocation, no argument tuple */
static PyObject *tq_nt_items(PyObject *cls, Py_ssize_t n, PyObject **items) {
    Py_ssize_t i;
    PyObject *o, *t;
    if (!tq_nt_fast) {
        t = PyTuple_New(n);
        if (t == NULL) return NULL;
        for (i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SET_ITEM(t, i, items[i]); }
        o = tq_nt_slow(cls, t);
        Py_DECREF(t);
        return o;
    }
#if TQ_GC_NEWVAR_OK
    /* tp_alloc (PyType_GenericAlloc) zero-fills and tracks; here every item is written before the
       collector can see the tuple, then it is tracked */
    o = (PyObject *)PyObject_GC_NewVar(PyVarObject, (PyTypeObject *)cls, n);
    if (o == NULL) return NULL;
    for (i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SET_ITEM(o, i, items[i]); }
    PyObject_GC_Track(o);
#else
    o = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, n);
    if (o == NULL) return NULL;
    for (i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SET_ITEM(o, i, items[i]); }
#endif
    return o;
}
static PyObject *tq_nt_new(PyObject *cls, PyObject *fields) {
    return tq_nt_items(cls, PyTuple_GET_SIZE(fields), &PyTuple_GET_ITEM(fields, 0));
}
static PyObject *tq_nt5(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e) {
    PyObject *it[5] = {a, b, c, d, e};
    return tq_nt_items(cls, 5, it);
}
static PyObject *tq_nt6(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e,
                        PyObject *f) {
    PyObject *it[6] = {a, b, c, d, e, f};
    return tq_nt_items(cls, 6, it);
}
static PyObject *tq_nt7(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e,
                        PyObject *f, PyObject *g) {
    PyObject *it[7] = {a, b, c, d, e, f, g};
    return tq_nt_items(cls, 7, it);
}
static PyObject *tq_nt11(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e,
                         PyObject *f, PyObject *g, PyObject *h, PyObject *i, PyObject *j, PyObject *k) {
    PyObject *it[11] = {a, b, c, d, e, f, g, h, i, j, k};
    return tq_nt_items(cls, 11, it);
}
/* A dict sized for n items up front (no rehash while it fills); plain PyDict_New where the
   CPython helper is not available. */
static PyObject *tq_dict_presized(Py_ssize_t n) {
#if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x030E0000 && !defined(PYPY_VERSION) && !defined(Py_LIMITED_API)
    if (n > 5) return _PyDict_NewPresized(n);
#endif
    return PyDict_New();
}
/* The same instance, never tracked by the collector: for tuples of str, int and bool only (such a
   tuple cannot be part of a cycle; CPython untracks a plain tuple of them at its next collection). Allocated without tp_alloc's zero-fill and
   tracking where the tuple layout is known (3.11 - 3.13, GIL builds); tracked-then-untracked elsewhere. */
static PyObject *tq_nt_items_untracked(PyObject *cls, Py_ssize_t n, PyObject **items) {
    Py_ssize_t i;
    PyObject *o;
#if TQ_GC_NEWVAR_OK
    if (tq_nt_fast) {
        o = (PyObject *)PyObject_GC_NewVar(PyVarObject, (PyTypeObject *)cls, n);
        if (o == NULL) return NULL;
        for (i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SET_ITEM(o, i, items[i]); }
        return o;
    }
#endif
    o = tq_nt_items(cls, n, items);
    if (o != NULL) PyObject_GC_UnTrack(o);
    return o;
}
static PyObject *tq_nt5_untracked(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d,
                                  PyObject *e) {
    PyObject *it[5] = {a, b, c, d, e};
    return tq_nt_items_untracked(cls, 5, it);
}
static PyObject *tq_nt7_untracked(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d,
                                  PyObject *e, PyObject *f, PyObject *g) {
    PyObject *it[7] = {a, b, c, d, e, f, g};
    return tq_nt_items_untracked(cls, 7, it);
}
/* A str from ASCII bytes (what PyUnicode_Substring makes of an ASCII slice, without its checks) */
static PyObject *tq_ascii_str(const unsigned char *s, Py_ssize_t n) {
    PyObject *u = PyUnicode_New(n, 127);
    if (u != NULL) memcpy(PyUnicode_DATA(u), s, (size_t)n);
    return u;
}
static int tq_nt_fast_possible(PyObject *cls) {
    PyTypeObject *t = (PyTypeObject *)cls;
    return PyType_Check(cls) && PyType_IsSubtype(t, &PyTuple_Type) && t->tp_alloc == PyType_GenericAlloc
        && t->tp_dictoffset == 0 && t->tp_itemsize == (Py_ssize_t)sizeof(PyObject *);
}

#endif /* TUBEMQ_TQ_TUPLES_H */
