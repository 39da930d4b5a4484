"""The §8.1 authentication signature, shared by the client (which signs) and the embedded master
(which verifies): URLEncode(Base64(HMAC-SHA1(password, user ‖ timestamp ‖ nonce))) with Java
``URLEncoder`` rules."""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import quote_plus


def auth_signature(user_name: str, password: str, timestamp_ms: int, nonce: int) -> str:
    """``TStringUtils.getAuthSignature``: vector ``auth_signature`` in vectors.json."""
    msg = f"{user_name}{int(timestamp_ms)}{int(nonce)}".encode()
    mac = hmac.new(password.encode("utf-8"), msg, hashlib.sha1).digest()
    return quote_plus(base64.b64encode(mac).decode("ascii"), safe="-_.*")
