"""A Prometheus collector for tubemq clients (the ``prometheus`` extra: prometheus_client).

``REGISTRY.register(TubeMQCollector(producer))`` (or :func:`register`) exposes the client's own
metrics at every scrape: counters as ``tubemq_<name>_total``, gauges as ``tubemq_<name>``, master and
broker health with ``server_address`` / ``server_port`` labels, and the latency histograms as
Prometheus histograms on the registry's own log-linear boundaries (``tubemq_<name>_seconds``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._extras import install_hint
from ..errors import TubeMQError
from .registry import EXPORT_BOUNDS, HEALTH_COUNTERS, HEALTH_GAUGES, Source, export_counts, number


def _client() -> Any:
    try:
        import prometheus_client
        from prometheus_client import core
    except ImportError as exc:
        raise TubeMQError(f"prometheus_client is not installed: {install_hint('prometheus')}") from exc
    return prometheus_client, core


def _metric_name(name: str) -> str:
    return "tubemq_" + name.replace(".", "_")


class TubeMQCollector:
    """A custom collector over one or more clients (``{"name": client}`` or a list); the label
    ``client`` tells them apart."""

    def __init__(self, clients: Any) -> None:
        _client()
        if isinstance(clients, dict):
            items = list(clients.items())
        elif isinstance(clients, (list, tuple)):
            items = [(f"{type(c).__name__}-{i}", c) for i, c in enumerate(clients)]
        else:
            items = [(type(clients).__name__, clients)]
        self.sources = [Source(c, str(n)) for n, c in items]

    def describe(self) -> list[Any]:
        return []  # no metadata up front: registering does not take a snapshot

    def collect(self) -> Iterator[Any]:
        _, core = _client()
        families: dict[str, Any] = {}

        def family(kind: str, name: str, doc: str, labels: list[str], unit: str = "") -> Any:
            fam = families.get(name)
            if fam is None:
                cls = {"counter": core.CounterMetricFamily, "gauge": core.GaugeMetricFamily,
                       "histogram": core.HistogramMetricFamily}[kind]
                fam = families[name] = cls(name, doc, labels=labels, unit=unit)
            return fam

        for src in self.sources:
            snap = src.refresh()
            if not snap:
                continue
            for cname, value in src.counters().items():
                family("counter", _metric_name(cname), f"tubemq {cname}", ["client"]).add_metric([src.name], value)
            for gname, value in snap.get("gauges", {}).items():
                family("gauge", _metric_name(gname), f"tubemq {gname}", ["client"]).add_metric([src.name], value)
            labels = ["client", "server_address", "server_port"]
            for role, attrs, entry in src.health():
                values = [src.name, str(attrs["server.address"]), str(attrs["server.port"])]
                for field, raw in entry.items():
                    figure = number(raw)
                    if figure is None:
                        continue
                    if field in HEALTH_COUNTERS:
                        family("counter", f"tubemq_{role}_{field}", f"tubemq {role} {field}", labels) \
                            .add_metric(values, figure)
                    elif field in HEALTH_GAUGES:
                        family("gauge", f"tubemq_{role}_{field}", f"tubemq {role} {field}", labels) \
                            .add_metric(values, figure)
            for hname in src.histogram_names:
                hist = src.histogram(hname)
                if hist is None:
                    continue
                counts, total = hist.buckets()
                folded = export_counts(counts)
                cumulative, running = [], 0
                for bound, n in zip([*map(repr, EXPORT_BOUNDS), "+Inf"], folded, strict=True):
                    running += n
                    cumulative.append((bound, running))
                family("histogram", _metric_name(hname), f"tubemq {hname} (log-linear buckets)", ["client"],
                       unit="seconds").add_metric([src.name], cumulative, sum_value=total)
        yield from families.values()


def register(clients: Any, registry: Any = None) -> TubeMQCollector:
    """A :class:`TubeMQCollector` registered with ``registry`` (default: prometheus_client's global one)."""
    prometheus_client, _ = _client()
    collector = TubeMQCollector(clients)
    (registry if registry is not None else prometheus_client.REGISTRY).register(collector)
    return collector


__all__ = ["TubeMQCollector", "register"]
