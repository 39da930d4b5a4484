/* Message construction straight from Cython's freelist, and the collector checks of the decoder.
   Macros only reference Cython's generated names: they expand inside functions of _codec.c.
   Part of tubemq.codec.compiled (included by compiled.pyx through `cdef extern from`). */
#ifndef TUBEMQ_TQ_MESSAGE_H
#define TUBEMQ_TQ_MESSAGE_H

#include <Python.h>

/* A Message taken straight from the freelist Cython keeps for it (@cython.freelist), each field
   written once. Cython's own construction (tp_new) zero-fills the object, stores None in every
   field, and each assignment then swaps the None out again. The freelist's names are Cython's
   own: used only with the Cython releases this was built and tested with (3.3.0, 3.3.1), so a
   later release that renames them builds Cython's path instead of failing to compile; elsewhere
   the macro gives NULL and the caller takes Cython's path. Expanded inside functions, after
   Cython's declarations. */
/* The Cython releases whose freelist names this file uses: [first, end). pyproject.toml's
   build-system pins Cython to the same range (tests/codec/test_build.py compares the two). */
#define TQ_MSG_CYTHON_FIRST 0x03030000
#define TQ_MSG_CYTHON_END 0x03030200
#if defined(CYTHON_HEX_VERSION) && CYTHON_HEX_VERSION >= TQ_MSG_CYTHON_FIRST && CYTHON_HEX_VERSION < TQ_MSG_CYTHON_END \
    && CYTHON_USE_FREELISTS && CYTHON_COMPILING_IN_CPYTHON && !CYTHON_COMPILING_IN_CPYTHON_FREETHREADING
#define TQ_MSG_POP() (__pyx_mstate_global->__pyx_freecount_6tubemq_5codec_8compiled_Message > 0 \
    ? (PyObject *)__pyx_mstate_global->__pyx_freelist_6tubemq_5codec_8compiled_Message[ \
        --__pyx_mstate_global->__pyx_freecount_6tubemq_5codec_8compiled_Message] \
    : (PyObject *)NULL)
#define TQ_MSG_TYPE_SPECS CYTHON_USE_TYPE_SPECS
#define TQ_MSG_FREELIST_FAST 1
#else
#define TQ_MSG_POP() ((PyObject *)NULL)
#define TQ_MSG_TYPE_SPECS 0
#define TQ_MSG_FREELIST_FAST 0
#endif
/* the ten object fields, in declaration order (checked contiguous at import) */
#define TQ_MSG_FIELDS(o) (&((struct __pyx_obj_6tubemq_5codec_8compiled_Message *)(o))->topic)
#define TQ_MSG_LAYOUT_OK (offsetof(struct __pyx_obj_6tubemq_5codec_8compiled_Message, _raw_attrs) \
    - offsetof(struct __pyx_obj_6tubemq_5codec_8compiled_Message, topic) == 9 * sizeof(PyObject *))
/* what Cython's tp_new does with a freelist entry, minus the zero-fill and the Nones; the one
   reference is the caller's */
static inline PyObject *tq_msg_init(PyObject *o, PyTypeObject *t, PyObject **fields, PyObject *const *vals,
                                    int track) {
    int i;
#if TQ_MSG_TYPE_SPECS
    Py_DECREF(Py_TYPE(o));  /* the freelist entry kept its type's reference */
#endif
    (void)PyObject_INIT(o, t);
    for (i = 0; i < 10; i++) { Py_INCREF(vals[i]); fields[i] = vals[i]; }
    if (track) PyObject_GC_Track(o);
    return o;
}
#define TQ_MSG_NEW(o, t, vals, mid, off, track) ( \
    ((struct __pyx_obj_6tubemq_5codec_8compiled_Message *)(o))->_mid = (mid), \
    ((struct __pyx_obj_6tubemq_5codec_8compiled_Message *)(o))->_off = (off), \
    tq_msg_init((o), (t), TQ_MSG_FIELDS(o), (vals), (track)))
/* message_id and offset kept as C values, the attributes as their raw text, until first read (the
   property builds the value and stores it). Not on a free-threaded build: two threads reading one
   message at once would both store. */
#ifdef Py_GIL_DISABLED
#define TQ_MSG_LAZY 0
#else
#define TQ_MSG_LAZY 1
#endif
/* Whether a field value can never lead back to a message: not a collector object at all (str,
   bytes, int, None), or a tuple (exact, or a subclass without a __dict__, as NamedTuples are)
   holding only such values. The decoder checks what its caller passes (topic, partition) with
   this before it builds messages untracked. */
static inline int tq_is_gc(PyObject *o) {  /* PyObject_IS_GC without the function call */
#if defined(PYPY_VERSION) || defined(Py_LIMITED_API)
    return PyObject_IS_GC(o);
#else
    PyTypeObject *t = Py_TYPE(o);
    return PyType_IS_GC(t) && (t->tp_is_gc == NULL || t->tp_is_gc(o));
#endif
}
static int tq_atomic(PyObject *o) {
    Py_ssize_t i;
#ifdef Py_GIL_DISABLED
    /* free-threaded: messages stay tracked (two threads writing one message could both find it
       untracked and track it twice) */
    (void)o; (void)i;
    return 0;
#endif
    if (!tq_is_gc(o)) return 1;
    if (!PyTuple_Check(o) || Py_TYPE(o)->tp_dictoffset != 0) return 0;
    for (i = 0; i < PyTuple_GET_SIZE(o); i++)
        if (tq_is_gc(PyTuple_GET_ITEM(o, i))) return 0;
    return 1;
}

#endif /* TUBEMQ_TQ_MESSAGE_H */
