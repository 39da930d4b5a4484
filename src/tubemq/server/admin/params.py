"""Parameter parsing and answer shapes shared by the admin API handlers (one home for the 400 texts)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Protocol

ERR_BAD_REQUEST = 400
ERR_UNAUTHORIZED = 401
ERR_NOT_FOUND = 404
MB = 1024 * 1024

#: The real master's and broker's rule for ``createUser``/``modifyUser`` (and topic names).
_NAME_RULE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
USER_PARAMS = ("createUser", "modifyUser")
#: A number in a parameter: ASCII digits, an optional leading "-" and nothing else (Python's int()
#: alone also takes "1_0", "+3", spaces and any Unicode digit, which no client sends on purpose).
_ASCII_INT = re.compile(r"-?[0-9]+")


def strict_int(text: str) -> int:
    """``int(text)`` for ASCII decimal digits only; ValueError for anything else."""
    if _ASCII_INT.fullmatch(text) is None:
        raise ValueError(f"not an ASCII decimal integer: {text!r}")
    return int(text)

#: One admin API method: request parameters -> the JSON answer.
Handler = Callable[[dict[str, str]], dict[str, Any]]


class RequestHandler(Protocol):
    """What the HTTP listener asks of the API behind it (``AdminApi``): one answer per request."""

    def handle(self, params: dict[str, str]) -> dict[str, Any]: ...


class _AdminError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _ok(**extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"result": True, "errCode": 0, "errMsg": "OK"}
    out.update(extra)
    return out


def _fail(code: int, message: str) -> dict[str, Any]:
    """A whole-call failure, shaped as the real master's: no ``data``."""
    return {"result": False, "errCode": code, "errMsg": message}


#: The real master's words for a refused admin token (HTTP 200, errCode 400, like every error there).
TOKEN_MISSING = "Bad request from client, Parameter confModAuthToken is missing or value is blank!"
TOKEN_WRONG = "Bad request from client, illegal access, unauthorized request!"


def _param(
    params: dict[str, str], name: str, default: str | None = None, *, required: bool = False
) -> str | None:
    value = params.get(name)
    if value is None or not value.strip():
        if required:
            raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} is required and must not be blank!")
        return default
    return value.strip()


def check_users(params: dict[str, str]) -> None:
    """Refuse a record user a real master or broker refuses, with its words (the same on both)."""
    for name in USER_PARAMS:
        value = params.get(name)
        if value is not None and value.strip() and _NAME_RULE.fullmatch(value.strip()) is None:
            raise _AdminError(ERR_BAD_REQUEST, f"illegal value for {name}, value must begin with a letter, can only "
                              "contain English letters, numbers, and underscores")


def _int_param(params: dict[str, str], name: str, default: int, lo: int, hi: int) -> int:
    text = _param(params, name)
    if text is None:
        return default
    try:
        value = strict_int(text)
    except ValueError:
        raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} must be an integer, got {text!r}") from None
    if not lo <= value <= hi:
        raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} must be within [{lo}, {hi}], got {value}")
    return value


def _int_items(name: str, text: str) -> Iterator[int]:
    """The integers of a comma-separated parameter, blanks skipped; lazily, so callers check each in order."""
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            value = strict_int(item)
        except ValueError:
            raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} must be integers, got {text!r}") from None
        yield value


def _bool_param(params: dict[str, str], name: str, default: bool) -> bool:
    text = _param(params, name)
    if text is None:
        return default
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} must be true or false, got {text!r}")


def _topic_names(params: dict[str, str], *, required: bool) -> list[str]:
    text = _param(params, "topicName", required=required)
    if text is None:
        return []
    return [t.strip() for t in text.split(",") if t.strip()]


def _json_params(text: str) -> dict[str, str]:
    """Parameters from a JSON object body: scalars only (a nested or deep body is a 400, never a crash)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        raise _AdminError(ERR_BAD_REQUEST, "request body is not a JSON object of parameters") from None
    if not isinstance(obj, dict):
        raise _AdminError(ERR_BAD_REQUEST, "request body is not a JSON object of parameters")
    out: dict[str, str] = {}
    for k, v in obj.items():
        if isinstance(v, bool):
            out[k] = str(v).lower()
        elif isinstance(v, (str, int, float)):
            out[k] = str(v)
        elif v is not None:
            raise _AdminError(ERR_BAD_REQUEST, f"Parameter {k} must be a string, number or boolean")
    return out
