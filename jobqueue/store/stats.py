"""The dashboard's statistics as rows: the histogram's buckets, the tiers old minute rows
are compacted into, and the retention that prunes them.

Workers write ``MinuteStat`` and ``QueueSample`` rows (``runtime/tally.py``) and compact and
prune them; the console's history (``console/history.py``) reads them. Both stand on this
module, so that the runtime never imports the operator's pages.
"""

from __future__ import annotations

import bisect
import datetime as dt

from jobqueue.models import MinuteStat, QueueSample
from jobqueue.sql import Queries

# Upper bounds (seconds) of the histogram's buckets; the last bucket has no upper bound.
# A row's column h00 counts values <= BOUNDS[0], h01 those in (BOUNDS[0], BOUNDS[1]], ...
BOUNDS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip
COLUMNS: tuple[str, ...] = tuple(f"h{i:02d}" for i in range(len(BOUNDS) + 1))
STARTED = "started"  # MinuteStat.outcome of the starts, whose histogram is of waits
RETENTION = dt.timedelta(days=8)  # stat and sample rows older than this are pruned
# How the stat rows are compacted (compact()): rows of the first span older than the lag are
# merged into rows of the second, summed over workers. The lags leave each range's chart only
# rows of spans no longer than its step: the 1 h chart per minute reads minute rows, the 24 h
# one per 10 minutes reads minute and 10-minute rows, the 7 d one per hour reads all.
TIERS: tuple[tuple[int, int, dt.timedelta], ...] = (
    (60, 600, dt.timedelta(minutes=70)),
    (600, 3600, dt.timedelta(hours=25)),
)


def bucket_of(seconds: float) -> int:
    """The index of the histogram bucket ``seconds`` falls in."""
    return bisect.bisect_left(BOUNDS, seconds)


def compact(using: str, now: dt.datetime) -> None:
    """Merge old stat rows into coarser ones (:data:`TIERS`): two statements."""
    queries = Queries(using)
    for from_span, to_span, lag in TIERS:
        before = int((now - lag).timestamp()) // to_span * to_span
        queries.compact_stats(from_span, to_span, dt.datetime.fromtimestamp(before, tz=dt.UTC))


def prune(using: str, now: dt.datetime, batch: int = 5000) -> int:
    """Delete one batch of stat and sample rows older than RETENTION; the rows deleted (a full
    batch means there may be more)."""
    cutoff = now - RETENTION
    deleted = 0
    for model in (MinuteStat, QueueSample):
        ids = list(
            model.objects.using(using)
            .filter(minute__lt=cutoff)
            .order_by("minute")
            .values_list("id", flat=True)[:batch]
        )
        if ids:
            deleted += model.objects.using(using).filter(id__in=ids).delete()[0]
    return deleted
