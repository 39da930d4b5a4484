"""Asyncio test helpers."""

from __future__ import annotations

from typing import Any


async def aclose_all(*things: Any) -> None:
    """``await x.close()`` for each of ``things``, in order, each even when an earlier one failed (the
    first failure is raised at the end): clients first, then the servers they talk to."""
    first: BaseException | None = None
    for x in things:
        try:
            await x.close()
        except BaseException as exc:  # noqa: BLE001 - raised below, after the others are closed
            first = first or exc
    if first is not None:
        raise first
