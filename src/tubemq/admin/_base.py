"""What the sync and asyncio admin clients share: endpoint, token handling and the operation table."""

from __future__ import annotations

import datetime as _dt
import re
import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from tubemq.errors import ConfigError

from .._webcall import tls_context
from . import _ops
from ._http import normalise_url

#: What a real master and broker accept as ``createUser``/``modifyUser``: a letter, then ASCII letters,
#: digits or ``_`` (``WebParameterUtils``); anything else refuses every admin write on a real cluster.
DEFAULT_USER = "tubemq_admin"
USER_RULE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def check_user(user: str) -> str:
    """``user`` when a real master would take it as a record's user; ``ConfigError`` otherwise."""
    if not isinstance(user, str) or USER_RULE.fullmatch(user) is None:
        raise ConfigError("user", f"{user!r} is refused by a real TubeMQ master: a user name must begin with a "
                          "letter and contain only English letters, digits and underscores (e.g. tubemq_admin)")
    return user
DEFAULT_TIMEOUT = 10.0
When = _dt.datetime | int | float


class _AdminBase:
    """Holds the master URL, the token (never shown) and builds the operations both clients run."""

    def __init__(
        self, url: str, token: str | None = None, *, user: str = DEFAULT_USER, timeout: float = DEFAULT_TIMEOUT,
        broker_urls: Mapping[int, str] | None = None, ssl_context: ssl.SSLContext | None = None,
        verify: bool | str = True,
    ) -> None:
        if not timeout > 0:
            raise ConfigError("timeout", f"must be positive, got {timeout!r}")
        self.url = normalise_url(url)
        self._token = token or None
        self.timeout = float(timeout)
        #: TLS for https URLs: ``ssl_context`` as given, or from ``verify`` (True: the system's CAs,
        #: False: no certificate check, a path: that CA bundle)
        self._tls = tls_context(ssl_context, verify)
        self._ctx = _ops.Ctx(check_user(user), {int(k): normalise_url(v) for k, v in (broker_urls or {}).items()})

    @property
    def user(self) -> str:
        return self._ctx.user

    @property
    def token(self) -> str | None:
        return self._token

    def __repr__(self) -> str:  # never shows the token
        return f"{type(self).__name__}({self.url!r}, token={'***' if self._token else None})"


def create_kwargs(
    partitions: int, stores: int, broker_ids: str | Iterable[int] | None, max_msg_size_mb: int | None,
    accept_publish: bool, accept_subscribe: bool,
) -> dict[str, Any]:
    if partitions < 1 or stores < 1:
        raise ConfigError("partitions", "partitions and stores must be at least 1")
    return {"partitions": partitions, "stores": stores, "broker_ids": broker_ids, "max_msg_size_mb": max_msg_size_mb,
            "accept_publish": accept_publish, "accept_subscribe": accept_subscribe}
