# Included by compiled.pyx: the metadata strings (§4.1 - §4.3): the producer topicInfo fast path.


cdef enum:
    _SMALL_BIDS = 512  # broker ids below this are memoised in a list (real ids are small integers)
    _STACK_ITEMS = 16  # topicInfo items scanned without a heap allocation (one per broker of the topic)


@cython.final
cdef class _BrokerRef:
    """A broker as the topicInfo scanner needs it; ``atomic``: host and port are exact str/int."""
    cdef object bid_obj, host, port
    cdef bint atomic


cdef _BrokerRef _broker_ref(object bid_obj, object broker):
    cdef _BrokerRef ref = _BrokerRef.__new__(_BrokerRef)
    ref.bid_obj = bid_obj
    if type(broker) is BrokerInfo:
        ref.host = <object>PyTuple_GET_ITEM(broker, 1)
        ref.port = <object>PyTuple_GET_ITEM(broker, 2)
    else:
        ref.host = broker.host
        ref.port = broker.port
    ref.atomic = PyUnicode_CheckExact(ref.host) and PyLong_CheckExact(ref.port)
    return ref


@cython.final
cdef class _TopicInfoState:
    """Per-call state: the caps, the brokers seen (by id) and the last max-size value (usually all equal)."""
    cdef int64_t bid
    cdef PyObject* found  # borrowed: the _BrokerRef of ``bid``, or None when it is not in the mapping
    # memo[bid] for small ids, borrowed from ``keep``: NULL (not looked up yet), None or a _BrokerRef
    cdef PyObject* memo[_SMALL_BIDS]
    cdef list keep
    cdef int64_t size
    cdef object size_obj
    cdef int64_t max_partitions, max_total
    cdef object _budget  # the twin's PartitionBudget, made on first use (only the rare checks need it)

    def __cinit__(self):
        self.bid = -1
        self.size = -1
        self.keep = []
        self.found = <PyObject*>None
        memset(self.memo, 0, sizeof(self.memo))

    cdef object budget(self):
        if self._budget is None:
            self._budget = PartitionBudget(self.max_partitions, self.max_total)
        return self._budget

    cdef int lookup_slow(self, int64_t bid, object brokers, bint exact) except -1:
        """Look broker ``bid`` up in the mapping; ``found`` and the memo then hold it (or None)."""
        cdef object broker, ref, bid_obj = PyLong_FromLongLong(bid)
        cdef PyObject* hit
        if exact:
            hit = PyDict_GetItemWithError(brokers, bid_obj)
            if hit == NULL and PyErr_Occurred():
                return -1
            broker = <object>hit if hit != NULL else None
        else:
            broker = brokers.get(bid_obj)
        ref = None if broker is None else _broker_ref(bid_obj, broker)
        PyList_Append(self.keep, ref)
        self.bid = bid
        self.found = <PyObject*>ref
        if 0 <= bid < _SMALL_BIDS:
            self.memo[bid] = <PyObject*>ref
        return 0


cdef inline PyObject* _lookup(_TopicInfoState st, int64_t bid, object brokers, bint exact) except NULL:
    """The broker ``bid`` (borrowed: a _BrokerRef, or None when unknown); the mapping is asked once per id."""
    if bid != st.bid:
        if 0 <= bid < _SMALL_BIDS and st.memo[bid] != NULL:
            st.bid = bid
            st.found = st.memo[bid]
        else:
            st.lookup_slow(bid, brokers, exact)
    return st.found


cdef bint _topic_info_fast(str text, object brokers, bint exact, list partitions, dict sizes,
                           _TopicInfoState st) except -1:
    """Canonical ASCII ``topic#bid:parts:stores,...[#maxsize]`` (C scanner); False: use the twin's parser.

    The whole string is checked before anything is built, so on False nothing was added. Over a
    partition cap it raises DecodeError (through the twin's check, for the same message) before
    building anything for that item, in the twin's item order.
    """
    if PyUnicode_KIND(text) != 1 or not PyUnicode_IS_ASCII(text):
        return False
    cdef const unsigned char* s = <const unsigned char*>PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef tq_ti_item stack_items[_STACK_ITEMS]
    cdef tq_ti_item* items = stack_items
    cdef Py_ssize_t tlen = 0, nitems, idx, start = PyList_GET_SIZE(partitions)
    cdef int64_t size = -1, parts, stores, count = 0, sidx, k, base
    cdef object topic, part
    cdef _BrokerRef ref
    cdef PyObject* found
    nitems = tq_topic_info_scan(s, n, &tlen, &size, items, _STACK_ITEMS)
    if nitems < 0:
        return False
    if nitems > _STACK_ITEMS:
        items = <tq_ti_item*>malloc(nitems * sizeof(tq_ti_item))
        if items == NULL:
            raise MemoryError()
        tq_topic_info_scan(s, n, &tlen, &size, items, nitems)
    try:
        topic = tq_ascii_str(s, tlen)
        for idx in range(nitems):
            found = _lookup(st, items[idx].bid, brokers, exact)
            if found == <PyObject*>None:
                continue
            ref = <_BrokerRef>found
            parts = items[idx].parts
            stores = items[idx].stores
            if parts > 0 and stores > 0:
                if (parts > st.max_partitions or stores > st.max_partitions
                        or start + count + parts * stores > st.max_partitions
                        or PyList_GET_SIZE(partitions) + parts * stores > st.max_total):
                    # over a cap, or this topic may have partitions from earlier entries: the twin's check
                    st.budget().check(topic, parts, stores, count, start, partitions)
                count += parts * stores
                for sidx in range(stores):
                    base = sidx * C_STORE_BASE
                    for k in range(parts):
                        if ref.atomic:
                            # only str and int inside: no cycle possible, so the tuple is never tracked by
                            # the collector (what CPython does to such tuples at its next collection)
                            part = tq_nt5_untracked(_PARTITION, ref.bid_obj, ref.host, ref.port, topic,
                                                    PyLong_FromLongLong(base + k))
                        else:
                            part = tq_nt5(_PARTITION, ref.bid_obj, ref.host, ref.port, topic,
                                          PyLong_FromLongLong(base + k))
                        PyList_Append(partitions, part)
            elif parts > st.max_partitions or stores > st.max_partitions:
                st.budget().check(topic, parts, stores, count, start, partitions)
    finally:
        if items != stack_items:
            free(items)
    if size >= 0:
        if size != st.size:
            st.size = size
            st.size_obj = PyLong_FromLongLong(size)
        PyDict_SetItem(sizes, topic, st.size_obj)
    return True


def parse_topic_info(topic_infos, brokers, *, max_partitions=DEFAULT_MAX_PARTITIONS,
                     max_total_partitions=DEFAULT_MAX_TOTAL_PARTITIONS) -> tuple:
    """Expand producer topicInfos into partitions; returns (partitions, {topic: max size}).

    A topic expanding to more than ``max_partitions`` partitions (over all its entries), or a call to
    more than ``max_total_partitions``, raises DecodeError before the excess is built.
    """
    cdef list partitions = []
    cdef dict sizes = tq_dict_presized(PyObject_LengthHint(topic_infos, 0))
    cdef bint exact = PyDict_CheckExact(brokers)
    cdef _TopicInfoState st = _TopicInfoState.__new__(_TopicInfoState)
    st.max_partitions = max_partitions
    st.max_total = max_total_partitions
    # While it fills, the list is hidden from the collector: a collection triggered by the new tuples
    # would otherwise walk the whole growing list each time (what it holds stays alive: the list owns it).
    PyObject_GC_UnTrack(partitions)
    try:
        for text in topic_infos:
            if not (PyUnicode_CheckExact(text) and _topic_info_fast(text, brokers, exact, partitions, sizes, st)):
                topic_info_entry(text, brokers, partitions, sizes, st.budget())
    finally:
        PyObject_GC_Track(partitions)
    return partitions, sizes
