# Declarations other Cython modules may cimport from tubemq.codec.compiled (sans-IO wire codec).
#
#   from tubemq.codec.compiled cimport Message, FrameDecoder, c_crc32, c_encode_frame, c_encode_send, c_send_result
#
# Everything here has the same behaviour as the Python-visible functions of tubemq.codec.compiled.

from libc.stdint cimport int64_t, uint32_t


cdef class Message:
    """A consumed (or to-be-sent) message; same attributes as tubemq.codec.python.Message.

    The fields are readonly to Python: every write goes through Message.__setattr__, which puts a
    message the decoder left untracked by the collector back under its watch first."""
    cdef readonly object topic
    cdef readonly object data
    cdef object _attributes  # None until read: messages without attributes skip an empty dict
    cdef object _stream_id  # _UNBUILT (and _attributes too) until parsed from _raw_attrs on first read
    cdef object _msg_time
    cdef object _message_id  # _UNBUILT until first read: then the int of _mid (most readers never ask)
    cdef readonly object flag
    cdef readonly object partition
    cdef object _offset  # _UNBUILT until first read: then the int of _off
    cdef object _raw_attrs  # the attribute text's UTF-8 bytes while _attributes is _UNBUILT, else None
    cdef int64_t _mid
    cdef int64_t _off


cdef class FrameDecoder:
    """Streaming frame decoder; holds at most one incomplete frame."""
    cdef public Py_ssize_t max_frame_size
    cdef public Py_ssize_t max_blocks
    cdef object _error
    # scan state of the frame being read (offsets from the frame start)
    cdef Py_ssize_t _off
    cdef uint32_t _serial
    cdef uint32_t _blocks
    cdef uint32_t _done
    cdef Py_ssize_t _total
    # assembly of a frame cut across reads: result bytes, its capacity, header/length bytes so far
    cdef object _pay
    cdef Py_ssize_t _pcap
    cdef unsigned char _hdr[12]
    cdef Py_ssize_t _hlen
    cdef int _phase
    cdef Py_ssize_t _left

    cdef int _scan(self, const unsigned char* p, Py_ssize_t avail) noexcept
    cdef int _room(self, Py_ssize_t need) except -1
    cdef object _finish(self)
    cdef Py_ssize_t _assemble(self, const unsigned char* p, Py_ssize_t pos, Py_ssize_t n, list out) except -1
    cdef object _emit(self, const unsigned char* p)
    cdef void _reset_scan(self) noexcept
    cdef void _reset_assembly(self) noexcept
    cdef object _fail(self, str reason)


cdef uint32_t c_crc32(const unsigned char* p, Py_ssize_t n) noexcept nogil
cdef bytes c_encode_frame(uint32_t serial, const char* payload, Py_ssize_t n)
cdef Message c_new_message(object topic, object data, object attributes, object stream_id, object msg_time,
                           object message_id, object flag, object partition, object offset, bint track=*)
cdef bytes c_encode_send(uint32_t s, str client_id, str topic, int64_t partition_id, object data, int64_t flag,
                         int64_t sent_addr, int64_t visit_token, object msg_type, object msg_time,
                         object auth_token, int64_t checksum, int64_t timeout_ms, int64_t service_type,
                         int64_t protocol_ver)
cdef object c_send_result(object payload, object result_type, object topic, object partition, object key)
