"""Kept for imports of ``._produce``: the helpers live in tests/_support/produce.py."""

from _support.produce import CLIENT_ID, SENT_ADDR, produce, send_raw

__all__ = ["CLIENT_ID", "SENT_ADDR", "produce", "send_raw"]
