"""What the admin's dashboard page shows, as template context: the charts (SVG from
:mod:`jobqueue.charts`) with their data tables, the per-task table and the workers, all
read by :mod:`jobqueue.history`. The view in :mod:`jobqueue.admin` only checks permissions
and renders it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _

from jobqueue import signals
from jobqueue.console import charts, history

COLORS = {
    "succeeded": "#2e7d32",
    "failed": "#c62828",
    "retried": "#ef6c00",
    "snoozed": "#1565c0",
    "discarded": "#616161",
    "due": "#6a1b9a",
    "running": "#00838f",
    "p50": "#1565c0",
    "p95": "#c62828",
}


def label(moment: dt.datetime, step: int) -> str:
    local = timezone.localtime(moment)
    if step >= 3600:
        return local.strftime("%a %H:%M")
    return local.strftime("%H:%M")


def context(range_key: str, using: str, now: dt.datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    data = history.read(range_key, using, now)
    span = data.range
    labels = [label(start, span.step) for start in data.starts]
    per = (
        _("per minute")
        if span.step == 60
        else _("per %(minutes)d minutes") % {"minutes": span.step // 60}
    )
    finished = [charts.Series(o, data.finished[o], COLORS[o]) for o in signals.OUTCOMES]
    depth = [
        charts.Series("due", data.due, COLORS["due"]),
        charts.Series("running", data.running, COLORS["running"]),
    ]
    waits = [
        charts.Series("p50", data.wait_p50, COLORS["p50"]),
        charts.Series("p95", data.wait_p95, COLORS["p95"]),
    ]
    total = {o: sum(data.finished[o]) for o in signals.OUTCOMES}
    chart_list: list[dict[str, Any]] = [
        {
            "ident": "jq-finished",
            "heading": _("Jobs finished, by outcome (%(per)s)") % {"per": per},
            "svg": charts.stacked_bars(
                ident="jq-finished",
                title=_("Jobs finished %(per)s, by outcome, last %(range)s")
                % {"per": per, "range": span.label},
                desc=", ".join(f"{o}: {total[o]}" for o in signals.OUTCOMES)
                + _(" in all, one bar per bucket."),
                labels=labels,
                series=finished,
                unit=_("jobs"),
            ),
            "series": finished,
        },
        {
            "ident": "jq-depth",
            "heading": _("Queue depth (all queues, at the start of each bucket)"),
            "svg": charts.lines(
                ident="jq-depth",
                title=_("Queue depth, due and running jobs, last %(range)s")
                % {"range": span.label},
                desc=_("Latest: %(due)s due, %(running)s running.")
                % {"due": _latest(data.due), "running": _latest(data.running)},
                labels=labels,
                series=depth,
                unit=_("jobs"),
            ),
            "series": depth,
        },
        {
            "ident": "jq-wait",
            "heading": _("Wait from due to start, p50 and p95 (seconds)"),
            "svg": charts.lines(
                ident="jq-wait",
                title=_("Wait from due to start, p50 and p95, last %(range)s")
                % {"range": span.label},
                desc=_("Latest: p50 %(p50)s s, p95 %(p95)s s; bucket upper bounds.")
                % {"p50": _latest(data.wait_p50), "p95": _latest(data.wait_p95)},
                labels=labels,
                series=waits,
                unit=_("seconds"),
            ),
            "series": waits,
        },
    ]
    for chart in chart_list:
        chart["table"] = charts.data_table(labels, chart["series"], _("from"))
    return {
        "range": span,
        "ranges": list(history.RANGES.values()),
        "charts": chart_list,
        "tasks": data.tasks,
        "workers": history.workers(using, now),
    }


def _latest(values: Sequence[float | None]) -> str:
    for value in reversed(values):
        if value is not None:
            return charts.number(value)
    return "-"
