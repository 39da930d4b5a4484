"""The CLI's admin client: the public :class:`tubemq.admin.AdminClient` with the CLI's user name.

Master calls pass through :meth:`AdminClient.call`, the one seam the CLI tests replace; broker calls
(group offsets) go to the brokers' web APIs as in the public client.
"""

from __future__ import annotations

from typing import Any

from tubemq.admin import AdminClient as _PublicAdminClient
from tubemq.admin._http import Request
from tubemq.errors import AdminError

__all__ = ["DEFAULT_USER", "AdminClient", "AdminError"]

DEFAULT_USER = "tubemq_cli"


class AdminClient(_PublicAdminClient):
    """``tubemq topic|broker|group`` use this: records are modified by user ``tubemq_cli`` (or ``--user``)."""

    def __init__(self, url: str, token: str | None = None, *, user: str = DEFAULT_USER, timeout: float = 10.0) -> None:
        super().__init__(url, token, user=user, timeout=timeout)

    def call(self, op_type: str, method: str, **params: Any) -> dict[str, Any]:
        return super().call_request(Request(op_type, method, params))

    def call_request(self, req: Request) -> dict[str, Any]:
        if req.url is None:
            return self.call(req.op_type, req.method, **req.params)
        return super().call_request(req)
