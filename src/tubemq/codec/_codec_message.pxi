# Included by compiled.pyx: Message, the decoded message type, and decode_message.


# the fields Message.__setattr__ writes, in the order of its dispatch
cdef tuple _MSG_FIELDS = ("topic", "data", "stream_id", "msg_time", "message_id", "flag", "partition", "offset")


# what _message_id and _offset hold until first read (the decoder stores the C value beside them), and
# _attributes, _stream_id and _msg_time until the raw attribute text is parsed: the property builds the
# value then (a consumer that reads only ``data`` never pays for two ints and an attribute dict)
cdef object _UNBUILT = object()


cdef int _parse_attrs(Message m) except -1:
    """The attribute dict, and stream_id and msg_time where not written since, from the raw text."""
    cdef bytes raw = m._raw_attrs
    cdef dict attrs = _attrs_utf8(<const unsigned char*>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
    m._attributes = attrs  # a dict of str only this message holds: the collector state may stay
    if m._stream_id is _UNBUILT:
        m._stream_id = _dict_get(attrs, _TYPE_KEY)
    if m._msg_time is _UNBUILT:
        m._msg_time = _dict_get(attrs, _TIME_KEY)
    m._raw_attrs = None
    return 0


cdef inline int _msg_field(object name):
    """Index of ``name`` in _MSG_FIELDS, or -1: by identity first (attribute names in code are interned,
    as are these), then by value (a name built at run time)."""
    cdef int i
    for i in range(8):
        if <PyObject*>name == PyTuple_GET_ITEM(_MSG_FIELDS, i):
            return i
    for i in range(8):
        if name == <object>PyTuple_GET_ITEM(_MSG_FIELDS, i):
            return i
    return -1


cdef inline void _track(object o) noexcept:
    """Put an object the decoder left untracked back under the collector (no-op when tracked)."""
    if not PyObject_GC_IsTracked(o):
        PyObject_GC_Track(o)


@cython.freelist(4096)
cdef class Message:
    """A consumed (or to-be-sent) message.

    ``offset`` is None on a consumed message: a getMessage answer carries no per-message offset, and
    the batch's start plus 28 per message is wrong whenever the partition shares its store with
    siblings (their index entries interleave, §4.10). The exact positions are the batch's:
    ``Batch.start_offset`` and ``Batch.next_offset`` (docs/guide/consumer-offsets.md).
    """

    # Collector: the decoder builds messages untracked when every field is atomic (str, bytes, int,
    # None, a tuple of those) or a dict of str only it holds, like CPython's untracked tuples and
    # dicts: no cycle can pass through them, so a collection never visits them. A message is tracked
    # again before anything could make it part of a cycle: any field write (__setattr__: the fields
    # are readonly descriptors, so nothing writes around it), __init__ called again, and any access to
    # ``attributes`` (it hands out the mutable dict).

    def __init__(self, topic, data, attributes=None, stream_id=None, msg_time=None, message_id=0, flag=0,
                 partition=None, offset=-1):
        _track(self)
        self.topic = topic
        self.data = data
        self._attributes = attributes
        self._stream_id = stream_id
        self._msg_time = msg_time
        self._raw_attrs = None
        self._message_id = message_id
        self.flag = flag
        self.partition = partition
        self._offset = offset

    def __setattr__(self, name, value):
        _track(self)
        cdef int i = _msg_field(name)
        if i == 0:
            self.topic = value
        elif i == 1:
            self.data = value
        elif i == 2:
            self._stream_id = value
        elif i == 3:
            self._msg_time = value
        elif i == 4:
            self._message_id = value
        elif i == 5:
            self.flag = value
        elif i == 6:
            self.partition = value
        elif i == 7:
            self._offset = value
        else:  # attributes (its setter), a subclass's own attributes, or AttributeError
            PyObject_GenericSetAttr(self, name, <PyObject*>value)

    def __delattr__(self, name):
        # as before the fields became readonly: deleting one sets it to None
        if _msg_field(name) >= 0:
            setattr(self, name, None)
        else:
            PyObject_GenericSetAttr(self, name, NULL)

    @property
    def stream_id(self):
        if self._stream_id is _UNBUILT:
            _parse_attrs(self)
        return self._stream_id

    @property
    def msg_time(self):
        if self._msg_time is _UNBUILT:
            _parse_attrs(self)
        return self._msg_time

    @property
    def message_id(self):
        if self._message_id is _UNBUILT:  # an int is atomic: the collector state stays as it is
            self._message_id = PyLong_FromLongLong(self._mid)
        return self._message_id

    @property
    def offset(self):
        if self._offset is _UNBUILT:
            self._offset = PyLong_FromLongLong(self._off)
        return self._offset

    @property
    def value(self):
        return self.data

    def inlongmsg(self):
        """Decode ``data`` as an InLong container (:func:`tubemq.inlongmsg.decode`)."""
        # imported on first use; tubemq.inlongmsg sits below the codec and imports none of it
        from ..inlongmsg import decode

        return decode(self.data)

    @property
    def attributes(self):
        """The message's attributes; the empty dict of a message without any is made on first use."""
        _track(self)  # the caller gets the mutable dict: it could store the message in it
        if self._attributes is _UNBUILT:
            _parse_attrs(self)
        if self._attributes is None:
            self._attributes = {}
        return self._attributes

    @attributes.setter
    def attributes(self, value):
        _track(self)
        if self._attributes is _UNBUILT:  # stream_id and msg_time keep the values decoded with them
            _parse_attrs(self)
        self._attributes = value if value is not None else {}

    @attributes.deleter
    def attributes(self):
        _track(self)
        if self._attributes is _UNBUILT:
            _parse_attrs(self)
        self._attributes = {}  # as for the other fields, deleting resets: here to the empty dict

    def __repr__(self):
        return message_repr(self)

    def __eq__(self, other):
        if not isinstance(other, Message):
            return NotImplemented
        cdef Message o = <Message>other
        return (self.topic == o.topic and self.data == o.data and self.attributes == o.attributes
                and self.stream_id == o.stream_id and self.msg_time == o.msg_time
                and self.message_id == o.message_id and self.flag == o.flag
                and self.partition == o.partition and self.offset == o.offset)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __reduce__(self):
        return (Message, (self.topic, self.data, self.attributes, self.stream_id, self.msg_time,
                          self.message_id, self.flag, self.partition, self.offset))


cdef extern from "_c/tq_message.h":
    PyObject* TQ_MSG_POP()
    bint TQ_MSG_LAYOUT_OK
    bint TQ_MSG_FREELIST_FAST
    long TQ_MSG_CYTHON_FIRST
    long TQ_MSG_CYTHON_END
    Message TQ_MSG_NEW(PyObject* o, PyTypeObject* t, PyObject** vals, int64_t mid, int64_t off, bint track)
    bint TQ_MSG_LAZY
    bint tq_atomic(object o)



cdef extern from *:
    long CYTHON_HEX_VERSION  # defined by the C Cython generated for this module

cdef bint _MSG_DIRECT = TQ_MSG_FREELIST_FAST and TQ_MSG_LAYOUT_OK

#: Whether this build takes decoded messages straight from Cython's freelist (c_new_message's fast
#: path): only with a Cython release tq_message.h knows (pyproject.toml pins that range) and the
#: expected object layout. False means every Message takes Cython's slower construction;
#: tests/codec/test_build.py fails on a build where that happened silently.
MESSAGE_FREELIST_FAST_PATH = bool(_MSG_DIRECT)


def _hex_version(long v) -> tuple:
    return ((v >> 24) & 0xFF, (v >> 16) & 0xFF, (v >> 8) & 0xFF)


#: The Cython release that generated this module's C: (major, minor, patch).
BUILT_WITH_CYTHON = _hex_version(CYTHON_HEX_VERSION)
#: The Cython releases the fast path is compiled for: [first, end) as (major, minor, patch) tuples.
MESSAGE_FREELIST_CYTHON_RANGE = (_hex_version(TQ_MSG_CYTHON_FIRST), _hex_version(TQ_MSG_CYTHON_END))


cdef Message c_new_message(object topic, object data, object attributes, object stream_id, object msg_time,
                           object message_id, object flag, object partition, object offset, bint track=True):
    """Build a Message without argument parsing.

    ``track=False`` leaves it untracked by the collector: only for fields that satisfy tq_atomic, and
    an attribute dict of str that nothing else refers to (see the comment in Message)."""
    return _new_message(topic, data, attributes, stream_id, msg_time, message_id, 0, flag, partition, offset, 0,
                        None, track)


cdef inline Message _new_decoded(object data, object raw, int64_t mid, object flag, object topic,
                                 object partition, object offset, int64_t off, bint track):
    """The decode hot path: message_id (and offset when ``offset`` is _UNBUILT) kept as C values, the
    attributes (``raw``: their UTF-8 text, or None) unparsed, all built on first read; built at once
    where laziness is off (free-threaded: two readers would race on the slot)."""
    cdef Message m
    if TQ_MSG_LAZY:
        if raw is None:
            return _new_message(topic, data, None, None, None, _UNBUILT, mid, flag, partition, offset, off, None,
                                track)
        return _new_message(topic, data, _UNBUILT, _UNBUILT, _UNBUILT, _UNBUILT, mid, flag, partition, offset,
                            off, raw, track)
    m = _new_message(topic, data, None if raw is None else _UNBUILT, None if raw is None else _UNBUILT,
                     None if raw is None else _UNBUILT, PyLong_FromLongLong(mid), mid, flag, partition,
                     PyLong_FromLongLong(off) if offset is _UNBUILT else offset, off, raw, track)
    if raw is not None:
        _parse_attrs(m)
    return m


cdef Message _new_message(object topic, object data, object attributes, object stream_id, object msg_time,
                          object message_id, int64_t mid, object flag, object partition, object offset, int64_t off,
                          object raw_attrs, bint track):
    cdef PyObject* o = TQ_MSG_POP() if _MSG_DIRECT else NULL
    cdef PyObject* vals[10]
    if o != NULL:
        vals[0] = <PyObject*>topic
        vals[1] = <PyObject*>data
        vals[2] = <PyObject*>attributes
        vals[3] = <PyObject*>stream_id
        vals[4] = <PyObject*>msg_time
        vals[5] = <PyObject*>message_id
        vals[6] = <PyObject*>flag
        vals[7] = <PyObject*>partition
        vals[8] = <PyObject*>offset
        vals[9] = <PyObject*>raw_attrs
        return TQ_MSG_NEW(o, <PyTypeObject*>Message, vals, mid, off, track)
    cdef Message m = Message.__new__(Message)
    m.topic = topic
    m.data = data
    m._attributes = attributes
    m._stream_id = stream_id
    m._msg_time = msg_time
    m._raw_attrs = raw_attrs
    m._message_id = message_id
    m._mid = mid
    m.flag = flag
    m.partition = partition
    m._offset = offset
    m._off = off
    if not track:
        PyObject_GC_UnTrack(m)
    return m


cdef inline object _dict_get(dict d, str key):
    cdef PyObject* v = PyDict_GetItem(d, key)
    return <object>v if v != NULL else None


cdef object _build_message(const unsigned char* p, Py_ssize_t n, int64_t mid, int32_t flag, object topic,
                           object partition, object offset, int64_t off, bint strict, bint track):
    """Payload -> Message (attributes split off); None when malformed and not ``strict``.

    ``offset`` _UNBUILT: the offset is ``off``, built as an int on first read.

    ``track=False`` builds it untracked: the caller checked topic, partition and offset with tq_atomic;
    the rest is bytes, ints and a fresh dict of str."""
    cdef Py_ssize_t astart = 0, alen = -1
    if _split(p, n, flag, &astart, &alen):
        if strict:
            _split_error(p, n)
        return None
    if alen < 0:
        return _new_decoded(PyBytes_FromStringAndSize(<const char*>p, n), None, mid, flag, topic, partition,
                            offset, off, track)
    return _new_decoded(PyBytes_FromStringAndSize(<const char*>p + 4 + alen, n - 4 - alen),
                        PyBytes_FromStringAndSize(<const char*>p + 4, alen), mid, flag, topic, partition, offset, off,
                        track)


def decode_message(raw, topic, partition=None, offset=-1):
    """One TransferedMessage -> Message, or None when §4.9 says drop (bad checksum / header)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef int64_t checksum = _i64(raw.checksum)
    cdef int64_t mid = _i64(raw.message_id)
    cdef int64_t flag = _i64(raw.flag)
    _get(raw.payload, &b, &buf)
    try:
        if _crc(b.p, b.n) != checksum:
            return None
        return _build_message(b.p, b.n, mid, <int32_t>flag, topic, partition, offset, 0, False,
                              not (tq_atomic(topic) and tq_atomic(partition) and tq_atomic(offset)))
    finally:
        _release(&b, &buf)
