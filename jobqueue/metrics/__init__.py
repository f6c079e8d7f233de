"""Prometheus metrics (the ``metrics`` extra, ``prometheus-client``).

:mod:`.counters` counts what the workers and the supervisor do, from the signals they send;
:mod:`.exposition` serves ``/metrics`` for ``runjobs --metrics-port``; :mod:`.gauges` reads
the queues from the database at scrape time, for the Django view in :mod:`.views`.

``prometheus_client`` is imported only by those modules, so only once metrics are on.
"""

from __future__ import annotations

import importlib.util

INSTALL_HINT = "pip install django-jobqueue[metrics]"


def available() -> bool:
    """Whether ``prometheus_client`` can be imported (without importing it)."""
    return importlib.util.find_spec("prometheus_client") is not None
