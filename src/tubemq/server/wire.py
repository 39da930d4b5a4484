"""The server-facing half of the codec: decode requests, encode responses and stored messages.

Same implementation as :mod:`tubemq.codec` (the Cython core or its twin); kept apart so the client
codec's public surface stays what DESIGN.md lists.
"""

from __future__ import annotations

from ..codec import Request, implementation

# the implementation tubemq.codec chose (same switch, same objects)
if implementation == "cython":
    from ..codec import compiled as _impl
else:
    from ..codec import python as _impl  # type: ignore[no-redef]

decode_request = _impl.decode_request
encode_response = _impl.encode_response
encode_error_response = _impl.encode_error_response
encode_transfered_message = _impl.encode_transfered_message
wrap_repeated = _impl.wrap_repeated

__all__ = [
    "Request",
    "decode_request",
    "encode_error_response",
    "encode_response",
    "encode_transfered_message",
    "wrap_repeated",
]
