"""Prometheus metrics (prometheus-client), one set per process.

With `commons serve --workers N` every process writes its values to files under
PROMETHEUS_MULTIPROC_DIR (set by the command line to <data dir>/metrics before any process
imports this module), and whichever process answers /metrics adds them up. With one process
the default registry is used as is.

Numbers that live in PostgreSQL (push queue depth, worker heartbeats and the workers' push
counters) are read when /metrics is scraped, so that every web process reports the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

REQUESTS = Counter(
    "commons_http_requests_total", "HTTP requests answered, by route template and status",
    ["method", "route", "status"],
)
LATENCY = Histogram(
    "commons_http_request_duration_seconds",
    "Time to answer HTTP requests, by route template and status",
    ["method", "route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
WEBSOCKETS = Gauge(
    "commons_websocket_connections", "Open realtime websockets", multiprocess_mode="livesum",
)
WEBSOCKETS_OPENED = Counter("commons_websocket_connections_opened_total",
                            "Realtime websockets accepted")
HUB_DELIVERIES = Counter("commons_hub_deliveries_total",
                         "Events handed to realtime sockets (one per socket and event)")
HUB_DROPS = Counter("commons_hub_drops_total",
                    "Events a realtime stream dropped (held back too long or too many)")
SLOW_READERS = Counter("commons_hub_slow_reader_disconnects_total",
                       "Realtime sockets closed because their reader fell behind")
REDIS_RECONNECTS = Counter("commons_redis_reconnects_total",
                           "Realtime Redis subscription connections re-established")
PG_RECONNECTS = Counter("commons_postgres_reconnects_total",
                        "PostgreSQL connections opened to replace one that was lost")
PG_CONNECTIONS_OPENED = Counter("commons_postgres_connections_opened_total",
                                "PostgreSQL connections opened by the pools")
DB_POOL_SIZE = Gauge("commons_db_pool_connections", "Connections in the database pool",
                     multiprocess_mode="livesum")
DB_POOL_IN_USE = Gauge("commons_db_pool_in_use", "Database pool connections in use",
                       multiprocess_mode="livesum")
DB_POOL_MAX = Gauge("commons_db_pool_max", "Database pool size limit",
                    multiprocess_mode="livesum")


def registry() -> CollectorRegistry:
    """What /metrics reports: every process's values when there are several."""
    if not os.environ.get(MULTIPROC_ENV):
        return REGISTRY
    from prometheus_client import multiprocess

    merged = CollectorRegistry()
    multiprocess.MultiProcessCollector(merged)
    return merged


class _Fixed(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def database_families(queue_depth: int, workers: list[dict[str, Any]]) -> list[Metric]:
    """The numbers read from PostgreSQL at scrape time, as metric families."""
    depth = GaugeMetricFamily("commons_push_queue_depth", "Push jobs waiting to be sent")
    depth.add_metric([], queue_depth)
    alive = GaugeMetricFamily("commons_worker_alive",
                              "Workers whose heartbeat is recent (within 60 s)")
    alive.add_metric([], sum(1 for w in workers if w["age"] <= 60))
    age = GaugeMetricFamily("commons_worker_heartbeat_age_seconds",
                            "Seconds since each worker's last heartbeat", labels=["worker"])
    push = CounterMetricFamily("commons_push_jobs", "Push jobs handled by each worker since "
                               "it started, by outcome (sent, failed, retried, pruned)",
                               labels=["worker", "outcome"])
    for worker in workers:
        age.add_metric([worker["worker_id"]], worker["age"])
        stats = worker.get("stats") or {}
        for outcome in ("sent", "failed", "retried", "pruned"):
            push.add_metric([worker["worker_id"], outcome], int(stats.get(outcome, 0)))
    return [depth, alive, age, push]


def render(extra: list[Metric]) -> tuple[bytes, str]:
    """The exposition text of this process (or all of them) plus `extra` families."""
    text = generate_latest(registry())
    if extra:
        fixed = CollectorRegistry()
        fixed.register(_Fixed(extra))
        text += generate_latest(fixed)
    return text, CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """Drop a stopped process's live gauges (multiprocess mode only)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def names(text: bytes) -> Iterator[str]:
    """Metric names in an exposition text (tests)."""
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            yield line.split("{", 1)[0].split(" ", 1)[0]
