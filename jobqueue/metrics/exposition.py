"""``/metrics`` for ``runjobs --metrics-port``: one HTTP endpoint per ``runjobs``.

A single worker (``runjobs --pool NAME``) serves its own registry. A supervisor serves
itself and every child it ever started together: it makes a fresh directory, names it in
``PROMETHEUS_MULTIPROC_DIR`` (its own environment, inherited by each child it spawns), and
reads every process's files there with ``prometheus_client``'s ``MultiProcessCollector``.
A child's files stay after it dies, so a sum over them never goes backwards when a worker
is replaced; the directory is removed when the supervisor stops, and a new start makes a
new one, so nothing of an earlier run leaks in.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

from jobqueue.metrics import INSTALL_HINT, available, counters

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

logger = logging.getLogger("jobqueue.metrics")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Every interface, as Prometheus exporters do; see docs/monitoring.md for protecting it.
BIND_ADDRESS = "0.0.0.0"


def require() -> None:
    if not available():
        raise ImproperlyConfigured(
            f"Metrics need prometheus-client, which is not installed: {INSTALL_HINT}"
        )


def use_directory(directory: str) -> None:
    """Write this process's metrics under ``directory`` (multiprocess mode).

    Called before the metrics are created. Should the project have imported
    ``prometheus_client`` already, its choice of value class (made at import, from the
    environment) is made again, so that jobqueue's metrics go to files all the same.
    """
    os.environ[MULTIPROC_ENV] = directory
    import prometheus_client.values as values

    values.ValueClass = values.get_value_class()


class MetricsServer:
    """Serves ``/metrics`` on its own thread (prometheus_client's WSGI server, a daemon
    thread), from this process's registry or, with ``directory``, every process's files."""

    def __init__(self, port: int, *, directory: str | None = None) -> None:
        self.port = port
        self.directory = directory
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = REGISTRY
        if self.directory is not None:
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=self.directory)
        try:
            self._server, self._thread = start_http_server(
                self.port, addr=BIND_ADDRESS, registry=registry
            )
        except OSError as exc:
            raise ImproperlyConfigured(
                f"Could not serve metrics on port {self.port} ({BIND_ADDRESS}): {exc}"
            ) from exc
        if self.directory is None:
            logger.info("metrics: serving /metrics on port %s", self.port)
        else:
            logger.info(
                "metrics: serving /metrics on port %s for every worker (their files: %s)",
                self.port,
                self.directory,
            )

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class WorkerMetrics:
    """A single ``runjobs --pool`` worker: its own counters, served on ``port``."""

    def __init__(self, port: int) -> None:
        require()
        counters.install()
        self.server = MetricsServer(port)

    def start(self) -> None:
        self.server.start()

    def close(self) -> None:
        self.server.stop()


class SupervisorMetrics:
    """A supervisor's: a fresh multiprocess directory, its own counters (the recoveries it
    runs) and the endpoint for every process. ``child_ended`` when a child is reaped."""

    def __init__(self, port: int) -> None:
        require()
        self.directory = tempfile.mkdtemp(prefix="jobqueue-metrics-")
        use_directory(self.directory)
        counters.install()
        self.server = MetricsServer(port, directory=self.directory)

    def start(self) -> None:
        self.server.start()

    def child_ended(self, pid: int) -> None:
        """Drop the dead child's live gauges; its counters and histograms stay counted."""
        from prometheus_client import multiprocess

        with contextlib.suppress(OSError):
            multiprocess.mark_process_dead(pid, self.directory)

    def close(self) -> None:
        self.server.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def join(directory: str) -> None:
    """A supervised child: count into its supervisor's directory (it serves nothing)."""
    require()
    use_directory(directory)
    counters.install()
