"""The server-facing half of the codec: decode requests, encode responses and stored messages.

Same implementation as :mod:`tubemq.codec` (the Cython core or its twin); kept apart so the client
codec's public surface stays what DESIGN.md lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..codec import _impl

if TYPE_CHECKING:
    from .._codec_py import Request
else:
    Request = _impl.Request

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
