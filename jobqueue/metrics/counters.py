"""The in-process metrics: counters and histograms fed by the signals a worker (and the
supervisor) sends anyway, so that counting costs no statement of its own.

:func:`install` creates them once per process, in ``prometheus_client``'s default registry
(in multiprocess mode their values go to ``PROMETHEUS_MULTIPROC_DIR``, see
:mod:`jobqueue.metrics.exposition`), and connects the receivers. Receivers run on whichever
thread sends the signal (a slot, the writer, the maintenance thread); prometheus_client's
metrics are thread-safe.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from jobqueue import signals

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# The outcomes of jobqueue_jobs_finished_total: signals.OUTCOMES, and "aborted" for an
# outcome the fence refused (job_aborted).
ABORTED = "aborted"
FINISHED_OUTCOMES = (*signals.OUTCOMES, ABORTED)

# Seconds a handler ran: from a few milliseconds to an hour.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
# Seconds from due to started: a healthy queue starts jobs within milliseconds; a backlog
# is late by minutes or hours.
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600)


class JobMetrics:
    """The metric objects, in ``registry``, and the receivers that count into them."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import REGISTRY, Counter, Histogram

        registry = REGISTRY if registry is None else registry
        self.started = Counter(
            "jobqueue_jobs_started",
            "Attempts started, per queue and task.",
            ["queue", "task"],
            registry=registry,
        )
        self.finished = Counter(
            "jobqueue_jobs_finished",
            "Attempts ended, per queue, task and outcome (succeeded, failed, retried, "
            "snoozed, discarded; aborted: the fence refused the outcome).",
            ["queue", "task", "outcome"],
            registry=registry,
        )
        self.recovered = Counter(
            "jobqueue_jobs_recovered",
            "Jobs of a dead or lost worker recovered, per queue, task and result (pending, "
            "abandoned).",
            ["queue", "task", "result"],
            registry=registry,
        )
        self.duration = Histogram(
            "jobqueue_job_duration_seconds",
            "Seconds a job's handler ran, per attempt.",
            ["queue", "task"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.wait = Histogram(
            "jobqueue_job_wait_seconds",
            "Seconds from a job falling due (its run_at) to its attempt starting.",
            ["queue"],
            buckets=WAIT_BUCKETS,
            registry=registry,
        )

    def connect(self) -> None:
        """Count what the signals say from now on (kept connected: weak=False)."""
        signals.job_started.connect(self.on_started, weak=False)
        signals.job_finished.connect(self.on_finished, weak=False)
        signals.job_aborted.connect(self.on_aborted, weak=False)
        signals.jobs_recovered.connect(self.on_recovered, weak=False)

    def disconnect(self) -> None:
        signals.job_started.disconnect(self.on_started)
        signals.job_finished.disconnect(self.on_finished)
        signals.job_aborted.disconnect(self.on_aborted)
        signals.jobs_recovered.disconnect(self.on_recovered)

    def on_started(self, sender: Any, *, task_name: str, queue: str, **kwargs: Any) -> None:
        self.started.labels(queue=queue, task=task_name).inc()
        wait = kwargs.get("wait")
        if wait is not None:
            self.wait.labels(queue=queue).observe(max(0.0, wait))

    def on_finished(
        self, sender: Any, *, task_name: str, queue: str, outcome: str, **kwargs: Any
    ) -> None:
        self.finished.labels(queue=queue, task=task_name, outcome=outcome).inc()
        self._observe_duration(queue, task_name, kwargs.get("duration"))

    def on_aborted(self, sender: Any, *, task_name: str, queue: str, **kwargs: Any) -> None:
        self.finished.labels(queue=queue, task=task_name, outcome=ABORTED).inc()
        self._observe_duration(queue, task_name, kwargs.get("duration"))

    def on_recovered(self, sender: Any, *, jobs: list[signals.RecoveredJob], **kwargs: Any) -> None:
        for job in jobs:
            self.recovered.labels(queue=job.queue, task=job.task_name, result=job.status).inc()

    def _observe_duration(self, queue: str, task_name: str, duration: float | None) -> None:
        if duration is not None:  # None: its handler never began
            self.duration.labels(queue=queue, task=task_name).observe(max(0.0, duration))


_installed: JobMetrics | None = None
_lock = threading.Lock()


def install() -> JobMetrics:
    """This process's metrics in the default registry, counting; created on the first call."""
    global _installed
    with _lock:
        if _installed is None:
            _installed = JobMetrics()
            _installed.connect()
        return _installed
