"""The keyword options of the clients as TypedDicts (re-exported by :mod:`tubemq.config`).

``Producer(master, **options: Unpack[ProducerOptions])`` lets a type checker refuse a misspelt option
(``rpc_timout_ms=``) or a wrong type; tests/typing/test_typed_options.py keeps these in step with the
config dataclasses' fields.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any, TypedDict


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known option ``name`` is most likely a typo of (``rpc_timout_ms`` -> ``rpc_timeout_ms``), or
    None: what a "did you mean" names, as a type checker's message does."""
    names = {k.lower(): k for k in known}
    match = difflib.get_close_matches(name.lower(), list(names), n=1, cutoff=0.8)
    return names[match[0]] if match else None


def unknown_option(name: str, known: Iterable[str]) -> str:
    """The message for an option nobody defines: the likely intended one first, then the known ones."""
    names = sorted(known)
    guess = closest(name, names)
    hint = f"; did you mean {guess!r}?" if guess else ""
    return f"unknown option{hint} (known: {', '.join(names)})"


class ClientOptions(TypedDict, total=False):
    """The keyword options of every client (``**options``), typed: a type checker refuses a misspelt
    name (``rpc_timout_ms=``) or a wrong type before the run does (the run raises ConfigError, naming the closest known option).
    Same names and meanings as :class:`ClientConfig`'s fields."""

    rpc_timeout_ms: int
    connect_timeout_ms: int
    heartbeat_period_ms: int
    register_retry_wait_ms: int
    pool: str
    max_inflight: int
    tls: bool
    tls_ca: str | None
    tls_cert: str | None
    tls_key: str | None
    tls_verify: bool
    auth_user: str | None
    auth_password: str | None
    local_address: str | None
    stats_interval_ms: int
    stats_callback: Callable[[dict[str, Any]], Any] | None
    max_partitions: int
    max_total_partitions: int


class ProducerOptions(ClientOptions, total=False):
    """``Producer(master, **options)`` / ``tubemq.aio.Producer``: :class:`ProducerConfig`'s fields."""

    max_pending: int
    max_block_ms: int
    retries: int
    retry_backoff_ms: int
    unavailable_ms: int
    broker_failure_threshold: int
    broker_shield_ms: int
    partitioner: str | Callable[..., Any]
    value_serializer: Any
    key_serializer: Any


class ConsumerOptions(ClientOptions, total=False):
    """``Consumer(master, group, topics, **options)`` / ``tubemq.aio.Consumer``: :class:`ConsumerConfig`'s
    fields other than those named in the signature (master, group, topics, consume_from)."""

    fetch_concurrency: int
    prefetch_batches: int
    msg_not_found_wait_ms: int
    filter_wait_ms: int
    confirm_in_local: bool
    confirm_timeout_ms: int
    rebalance_confirm_wait_ms: int
    register_rounds: int
    shutdown_wait_ms: int
    heartbeat_fail_wait_ms: int
    verify_checksum: bool
    client_filter: bool
    hook_timeout_ms: int
    iter_timeout_ms: int
    close_timeout_ms: int
    value_deserializer: Any
    bound_offsets: Any
    session_key: str
    source_count: int
    select_big: bool


__all__ = ["ClientOptions", "ConsumerOptions", "ProducerOptions"]
