"""Prometheus metrics of one agent server: `ServerMetrics`, exported at `GET /metrics`.

Counted in this process (reset when it restarts; Prometheus' `rate()` and `increase()` handle
that): HTTP requests and their latency by route template, WebSocket connections (open, opened,
refused and why), client messages by type and how long their handlers took, messages sent by
type, completions served and edits proposed, and outcomes recorded by kind, suggestion kind
and adapter. Read from the database at scrape time (`FeedbackCollector`, every figure a SQL
aggregate, cached for `cache_s`): outcomes per adapter over the whole feedback log, learner
runs by status, each step's duration in its latest run, the serving adapter's version and the
last train step's tokens/s. Each app has its own registry, so two servers in one test process
do not share counts.

The names, for dashboards (deploy/grafana/dashboards/apprentice.json must use only these;
tests/api/test_metrics.py checks): see `ServerMetrics.__init__` and `FeedbackCollector.collect`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feedback.db import transaction
from feedback.queries import active_deployment
from feedback.queries.stats import (
    latest_step_peak_rss_gb,
    latest_step_seconds,
    latest_train_tokens_per_s,
    outcome_counts,
    recent_steps,
    run_status_counts,
)
from feedback.vocab import adapter_name

log = logging.getLogger(__name__)

PREFIX = "apprentice"
# Latency buckets (seconds) from a quick ping to a long agent turn.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
BASE = "base"  # the adapter label of suggestions served by the base model


def adapter_label(version: int | None) -> str:
    return adapter_name(version) if version else BASE


class ServerMetrics:
    """The agent server's own counters, histograms and gauges, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r, p = self.registry, PREFIX
        self.http_requests = Counter(
            f"{p}_http_requests", "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"], registry=r,
        )  # fmt: skip
        self.http_seconds = Histogram(
            f"{p}_http_request_seconds", "HTTP request latency by method and route template.",
            ["method", "route"], buckets=_BUCKETS, registry=r,
        )  # fmt: skip
        self.ws_open = Gauge(f"{p}_ws_connections_open", "WebSocket connections open now.",
                             registry=r)  # fmt: skip
        self.ws_opened = Counter(f"{p}_ws_connections", "WebSocket connections accepted.",
                                 registry=r)  # fmt: skip
        self.ws_refused = Counter(
            f"{p}_ws_connections_refused", "WebSocket handshakes refused, by reason.",
            ["reason"], registry=r,
        )  # fmt: skip
        self.ws_received = Counter(
            f"{p}_ws_messages_received", "Client messages, by type ('invalid': unparseable).",
            ["type"], registry=r,
        )  # fmt: skip
        self.ws_handle_seconds = Histogram(
            f"{p}_ws_message_seconds", "Time to handle a client message (long work such as a "
            "turn runs on after its handler returns), by type.",
            ["type"], buckets=_BUCKETS, registry=r,
        )  # fmt: skip
        self.ws_sent = Counter(f"{p}_ws_messages_sent", "Server messages sent, by type.",
                               ["type"], registry=r)  # fmt: skip
        self.completions = Counter(
            f"{p}_completions_served", "Inline completions sent to an editor, by adapter.",
            ["adapter"], registry=r,
        )  # fmt: skip
        self.edits = Counter(f"{p}_edits_proposed", "Edit proposals sent to an editor.",
                             registry=r)  # fmt: skip
        self.outcomes = Counter(
            f"{p}_outcomes_recorded", "Outcomes stored by this server (duplicates not "
            "counted), by outcome kind, suggestion kind and adapter.",
            ["kind", "suggestion", "adapter"], registry=r,
        )  # fmt: skip
        self.live_sessions = Gauge(f"{p}_live_sessions", "Agent sessions held open now.",
                                   registry=r)  # fmt: skip
        self._database: FeedbackCollector | None = None

    def watch_sessions(self, count: Callable[[], int]) -> None:
        self.live_sessions.set_function(lambda: float(count()))

    def add_database(self, db: sessionmaker[Session], backend: str, cache_s: float = 5.0) -> None:
        """Report figures from this database (replacing an earlier one: an app restarted)."""
        if self._database is not None:
            self.registry.unregister(self._database)
        self._database = FeedbackCollector(db, backend, cache_s)
        self.registry.register(self._database)

    def observe_message(self, kind: str, seconds: float) -> None:
        self.ws_received.labels(kind).inc()
        self.ws_handle_seconds.labels(kind).observe(seconds)

    def sent(self, message: Any) -> None:
        kind = getattr(message, "type", type(message).__name__)
        self.ws_sent.labels(kind).inc()
        if kind == "completion.suggestion":
            self.completions.labels(getattr(message, "adapter", None) or BASE).inc()
        elif kind == "edit.proposed":
            self.edits.inc()


class FeedbackCollector:
    """Figures read from the feedback database when Prometheus scrapes (SQL aggregates)."""

    def __init__(self, db: sessionmaker[Session], backend: str, cache_s: float) -> None:
        self.db, self.backend, self.cache_s = db, backend, cache_s
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] | None = None

    def describe(self) -> list[Metric]:
        return []  # computed at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] >= self.cache_s:
                self._cached = (now, self._read())
            yield from self._cached[1]

    def _read(self) -> list[Metric]:
        p = PREFIX
        up = GaugeMetricFamily(f"{p}_feedback_db_up", "1 when the last read of the database "
                               "for these metrics worked.")  # fmt: skip
        try:
            with transaction(self.db) as db:
                outcomes = outcome_counts(db)
                runs = run_status_counts(db)
                recent = recent_steps(db)
                steps = latest_step_seconds(recent)
                tokens_per_s = latest_train_tokens_per_s(recent)
                peak_rss = latest_step_peak_rss_gb(recent)
                deployment = active_deployment(db, backend=self.backend)
        except Exception as exc:  # a dead database must not break the scrape
            log.warning("metrics: cannot read the feedback database: %s", exc)
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        by_adapter = GaugeMetricFamily(
            f"{p}_feedback_outcomes", "Outcomes in the feedback log, by outcome kind, "
            "suggestion kind and the adapter that served the suggestion.",
            labels=["kind", "suggestion", "adapter"],
        )  # fmt: skip
        for suggestion, version, kind, n in outcomes:
            by_adapter.add_metric([kind, suggestion, adapter_label(version)], n)
        run_family = GaugeMetricFamily(f"{p}_learner_runs", "Learner runs by status.",
                                       labels=["status"])  # fmt: skip
        for status, n in sorted(runs.items()):
            run_family.add_metric([status], n)
        step_family = GaugeMetricFamily(
            f"{p}_learner_step_seconds", "Each learner step's wall time in the latest run "
            "that finished it.", labels=["step"],
        )  # fmt: skip
        for name, seconds in sorted(steps.items()):
            step_family.add_metric([name], seconds)
        serving = GaugeMetricFamily(
            f"{p}_serving_adapter_version", "The adapter version the deployments table names "
            "for this server's backend (0: the base model).",
        )  # fmt: skip
        serving.add_metric([], float((deployment.adapter_version or 0) if deployment else 0))
        train = GaugeMetricFamily(f"{p}_learner_train_tokens_per_second",
                                  "Tokens/s of the latest run's train step (none: no run "
                                  "reported it yet).")  # fmt: skip
        if tokens_per_s is not None:
            train.add_metric([], tokens_per_s)
        memory = GaugeMetricFamily(
            f"{p}_learner_step_peak_rss_gigabytes", "Each learner step's peak resident set "
            "(GB) in the latest run that recorded it.", labels=["step"],
        )  # fmt: skip
        for name, gb in sorted(peak_rss.items()):
            memory.add_metric([name], gb)
        return [up, by_adapter, run_family, step_family, serving, train, memory]


class HttpMetricsMiddleware:
    """Counts HTTP requests by route template (never the raw path: ids would explode the
    label set); WebSockets are counted by their own route and connection."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client sees when the app raises before answering
        started = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "GET")
            self.metrics.http_requests.labels(method, template, str(status)).inc()
            self.metrics.http_seconds.labels(method, template).observe(
                time.perf_counter() - started
            )
