# Declarations other Cython modules may cimport from tubemq._codec (sans-IO wire codec).
#
#   from tubemq._codec cimport Message, FrameDecoder, c_crc32, c_encode_frame
#
# Everything here has the same behaviour as the Python-visible functions of tubemq._codec.

from libc.stdint cimport uint32_t


cdef class Message:
    """A consumed (or to-be-sent) message; same attributes as tubemq._codec_py.Message."""
    cdef public object topic
    cdef public object data
    cdef object _attributes  # None until read: messages without attributes skip an empty dict
    cdef public object stream_id
    cdef public object msg_time
    cdef public object message_id
    cdef public object flag
    cdef public object partition
    cdef public object offset


cdef class FrameDecoder:
    """Streaming frame decoder; holds at most one incomplete frame."""
    cdef public Py_ssize_t max_frame_size
    cdef public Py_ssize_t max_blocks
    cdef char* _buf
    cdef Py_ssize_t _len
    cdef Py_ssize_t _cap
    cdef object _error
    # scan state of the frame whose prefix is in _buf (offsets from the frame start)
    cdef Py_ssize_t _off
    cdef uint32_t _serial
    cdef uint32_t _blocks
    cdef uint32_t _done
    cdef Py_ssize_t _total

    cdef int _scan(self, const unsigned char* p, Py_ssize_t avail) noexcept
    cdef Py_ssize_t _need(self) noexcept
    cdef int _reserve(self, Py_ssize_t n) except -1
    cdef object _emit(self, const unsigned char* p)
    cdef void _reset_scan(self) noexcept
    cdef object _fail(self, str reason)
    cdef Py_ssize_t _estimate(self, Py_ssize_t have) noexcept


cdef uint32_t c_crc32(const unsigned char* p, Py_ssize_t n) noexcept nogil
cdef bytes c_encode_frame(uint32_t serial, const char* payload, Py_ssize_t n)
cdef Message c_new_message(object topic, object data, object attributes, object stream_id, object msg_time,
                           object message_id, object flag, object partition, object offset)
