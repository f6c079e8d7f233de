"""The health probe behind ``manage.py jobs health``: what stops jobs from running now.

Three kinds of finding, each one line:

- a **problem** (``no_worker``): a queue has due jobs and no live worker serves it (no pool
  does, or its pool's workers are down); a paused queue is not one;
- a **problem** (``max_wait``): the oldest due job of an unpaused queue has waited longer
  than ``max_wait`` seconds;
- a **warning** (``abandoned``): jobs parked as abandoned wait for an operator's Retry or
  Discard; a problem only when the probe is ``strict``;

and **info** (``paused``): a paused queue with due jobs, which is what its operator asked for.

Three queries, each bounded by what is waiting, never by the finished rows: the due jobs
per queue through the claim's partial index (pending rows only), the abandoned jobs per
queue through the status index, and the live workers' rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count, Min
from django.utils import timezone

from jobqueue import conf, states
from jobqueue.console import overview
from jobqueue.models import Job
from jobqueue.runtime.queues import QueueSelection
from jobqueue.store import pauses

DEFAULT_MAX_WAIT = 300.0
# An on-demand pool has no worker until its supervisor starts one for due jobs, which takes
# a few seconds: its queue is reported as unserved only once a due job has waited this long.
ON_DEMAND_START = 60.0

Level = Literal["problem", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    level: Level
    kind: str  # "no_worker", "max_wait", "abandoned", "paused"
    queue: str
    message: str
    count: int  # the jobs it is about
    oldest_due_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    strict: bool = False

    @property
    def failures(self) -> list[Finding]:
        """The findings that make the probe fail: problems, and warnings when strict."""
        levels = ("problem", "warning") if self.strict else ("problem",)
        return [f for f in self.findings if f.level in levels]

    @property
    def healthy(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "strict": self.strict,
            "findings": [f.as_dict() for f in self.findings],
        }


def check(
    *,
    max_wait: float = DEFAULT_MAX_WAIT,
    strict: bool = False,
    using: str = DEFAULT_DB_ALIAS,
    settings: conf.Settings | None = None,
) -> Report:
    """Look once and say what is wrong, queue by queue (in name order)."""
    settings = settings or conf.get()
    now = timezone.now()
    jobs = Job.objects.using(using).order_by()
    due = {
        row["queue"]: row
        for row in jobs.filter(status=states.PENDING, run_at__lte=now)
        .values("queue")
        .annotate(n=Count("id"), oldest=Min("run_at"))
    }
    abandoned = dict(
        jobs.filter(status=states.ABANDONED).values_list("queue").annotate(n=Count("id"))
    )
    paused = pauses.paused(using)
    workers = list(overview.live_workers(using, settings).values_list("queues", flat=True))
    report = Report(strict=strict)
    for queue in sorted(set(due) | set(abandoned)):
        if queue in due:
            report.findings += _due(queue, due[queue], now, max_wait, paused, workers, settings)
        if abandoned.get(queue):
            n = abandoned[queue]
            report.findings.append(
                Finding(
                    "warning",
                    "abandoned",
                    queue,
                    f'queue "{queue}": {n} abandoned job(s) wait for an operator '
                    f"(retry or discard them: manage.py jobs retry --status abandoned "
                    f"--queue {queue})",
                    n,
                )
            )
    return report


def _due(
    queue: str,
    row: Mapping[str, Any],
    now: dt.datetime,
    max_wait: float,
    paused: dict[str, Any],
    workers: list[Any],
    settings: conf.Settings,
) -> list[Finding]:
    n: int = row["n"]
    age = (now - row["oldest"]).total_seconds()
    waited = f"the oldest has waited {age:.0f} s"
    if queue in paused:
        pause = paused[queue]
        by = f" by {pause.paused_by}" if pause.paused_by else ""
        since = pause.paused_at.isoformat(timespec="seconds")
        return [
            Finding(
                "info",
                "paused",
                queue,
                f'queue "{queue}" is paused{by} since {since}: {n} due job(s) wait for '
                "manage.py jobs resume",
                n,
                age,
            )
        ]
    findings = []
    pool = settings.pool_for(queue)
    if pool is None:
        findings.append(
            Finding(
                "problem",
                "no_worker",
                queue,
                f'queue "{queue}": {n} due job(s) and no pool serves it ({waited}); list it '
                'in a pool\'s queues, route it in JOBQUEUE["ROUTING"], or add a catch-all pool',
                n,
                age,
            )
        )
    elif not any(serves(w, queue) for w in workers) and (pool.resident or age > ON_DEMAND_START):
        findings.append(
            Finding(
                "problem",
                "no_worker",
                queue,
                f'queue "{queue}": {n} due job(s) and no live worker serves it ({waited}); '
                f'start the pool "{pool.name}": manage.py runjobs',
                n,
                age,
            )
        )
    if age > max_wait:
        findings.append(
            Finding(
                "problem",
                "max_wait",
                queue,
                f'queue "{queue}": the oldest of {n} due job(s) has waited {age:.0f} s, '
                f"more than --max-wait {max_wait:g} s",
                n,
                age,
            )
        )
    return findings


def serves(registered: Any, queue: str) -> bool:
    """Whether a worker that registered ``registered`` (its row's ``queues``) claims ``queue``."""
    selection = QueueSelection.from_row(registered)
    return selection is not None and selection.serves(queue)
