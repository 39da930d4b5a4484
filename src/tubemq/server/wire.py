"""The server-facing half of the codec: decode requests, encode responses and stored messages.

Same implementation as :mod:`tubemq.codec` (the Cython core or its twin); kept apart so the client
codec's public surface stays what DESIGN.md lists.
"""

from __future__ import annotations

# the very objects tubemq.codec holds (it keeps them as attributes, unexported)
from ..codec import (
    Request,
    decode_request,
    encode_error_response,
    encode_response,
    encode_transfered_message,
    wrap_repeated,
)

__all__ = [
    "Request",
    "decode_request",
    "encode_error_response",
    "encode_response",
    "encode_transfered_message",
    "wrap_repeated",
]
