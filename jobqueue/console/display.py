"""The HTML pieces of the admin's pages: status badges, JSON, errors, steps, timeline, and
every time shown (:func:`moment`: to the second, the exact time and zone on hover).

Everything a job stores is shown escaped: arguments, results and tracebacks come from
application code and may hold any text.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from jobqueue import states
from jobqueue.console import overview
from jobqueue.store import explain

if TYPE_CHECKING:
    from jobqueue.models import Job

# Text on background; chosen to stay readable in the admin's light and dark themes.
COLOURS = {
    states.PENDING: "#3b6ea8",
    states.RUNNING: "#6b4fbb",
    states.SUCCEEDED: "#2e7d32",
    states.FAILED: "#c62828",
    states.ABANDONED: "#b35900",
    states.DISCARDED: "#666666",
}


def status_badge(status: str) -> SafeString:
    return format_html(
        '<span class="jobqueue-status jobqueue-status-{}" style="background:{};color:#fff;'
        'padding:1px 7px;border-radius:8px;white-space:nowrap">{}</span>',
        status,
        COLOURS.get(status, "#666666"),
        status,
    )


# What a page shows for nothing: no time, no result, no errors.
EMPTY = "\N{EM DASH}"


def status_and_attempts(job: Job) -> SafeString:
    """The changelist's status column: the badge, then attempts (and crashes, if any)."""
    attempts = f"{job.attempts} / {job.max_attempts}"
    if job.crashes:
        crashes = ngettext("%(count)d crash", "%(count)d crashes", job.crashes)
        attempts += ", " + crashes % {"count": job.crashes}
    return format_html(
        '{}<br><small class="jobqueue-attempts" title="{}">{}</small>',
        status_badge(job.status),
        _("attempts / max attempts"),
        attempts,
    )


def task_name(name: str) -> SafeString:
    """A task by its own name (``send_welcome``), its module's path on hover."""
    short = name.rpartition(".")[2] or name
    return format_html('<span class="jobqueue-task" title="{}">{}</span>', name, short)


def first_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def clipped(text: str, css_class: str) -> SafeString:
    """One line of ``text`` that the stylesheet may cut short, all of it on hover."""
    if not text.strip():
        return mark_safe(EMPTY)
    return format_html('<span class="{}" title="{}">{}</span>', css_class, text, first_line(text))


def pretty_json(value: Any) -> SafeString:
    """A JSON value, indented; nothing (``None``, ``[]``, ``{}``) reads as a dash."""
    if value is None or value == [] or value == {}:
        return mark_safe(EMPTY)
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre class="jobqueue-json" style="margin:0">{}</pre>', text)


def moment(
    value: dt.datetime | None, *, zone: dt.tzinfo | None = None, now: dt.datetime | None = None
) -> SafeString:
    """Every time the admin shows: a ``<time>`` to the second, the exact time with its zone
    and how long ago (or how soon) on hover.

    In the admin's time zone, a time of today reads ``16:15:03`` and any other
    ``2026-11-30 16:15:03``. Given ``zone`` (a schedule's ticks), it is shown in that zone,
    always with the date and the zone's name: a nightly run at 03:00 in Berlin reads 03:00
    whatever the admin's own time zone.
    """
    if value is None:
        return mark_safe(EMPTY)
    now = now or timezone.now()
    local = value.astimezone(zone) if zone is not None else timezone.localtime(value)
    exact = local.strftime("%Y-%m-%d %H:%M:%S %Z")
    if zone is not None:
        text = exact
    elif local.date() == timezone.localtime(now).date():
        text = local.strftime("%H:%M:%S")
    else:
        text = local.strftime("%Y-%m-%d %H:%M:%S")
    return format_html(
        '<time datetime="{}" title="{} ({})" class="jobqueue-time">{}</time>',
        value.isoformat(),
        exact,
        relative(value, now),
        text,
    )


def relative(value: dt.datetime, now: dt.datetime) -> str:
    """``3 minutes ago``, ``in 2 hours``, ``12 seconds ago``: the largest unit only."""
    seconds = (now - value).total_seconds()
    if abs(seconds) < 60:
        n = round(abs(seconds))
        if seconds >= 0:
            return ngettext("%(count)d second ago", "%(count)d seconds ago", n) % {"count": n}
        return ngettext("in %(count)d second", "in %(count)d seconds", n) % {"count": n}
    if seconds > 0:
        return _("%(delta)s ago") % {"delta": timesince(value, now, depth=1)}
    return _("in %(delta)s") % {"delta": timeuntil(value, now, depth=1)}


def tick(value: dt.datetime | None) -> SafeString:
    """A schedule's tick, in the zone it is given in (the schedule's)."""
    return moment(value, zone=value.tzinfo if value is not None else None)


def errors(job: Job) -> SafeString:
    """Every failed attempt, oldest first, each with its traceback folded away."""
    if not job.errors:
        return mark_safe(EMPTY)
    return format_html_join(
        "",
        '<div class="jobqueue-error" style="margin-bottom:.8em"><strong>{}</strong> {}'
        "<br><code>{}</code>{}</div>",
        (
            (
                _("Attempt %(attempt)s") % {"attempt": entry.get("attempt", "?")},
                format_html(
                    _("at {} on {}"), moment(_parse(entry.get("at"))), entry.get("worker") or "?"
                ),
                f"{entry.get('type', 'Error')}: {explain.message(entry)}",
                _traceback(entry.get("traceback") or ""),
            )
            for entry in job.errors
        ),
    )


def _traceback(text: str) -> SafeString:
    if not text:
        return mark_safe("")
    return format_html(
        "<details><summary>{}</summary><pre>{}</pre></details>", _("Traceback"), text
    )


def steps(job: Job) -> SafeString:
    if not job.steps:
        return mark_safe(EMPTY)
    rows = format_html_join(
        "",
        "<tr><th>{}</th><td>{}</td></tr>",
        ((name, pretty_json(value)) for name, value in job.steps.items()),
    )
    return format_html('<table class="jobqueue-steps">{}</table>', rows)


def timeline(job: Job) -> SafeString:
    """Enqueued, each failed attempt, the latest start, the end: in the order they happened."""
    events: list[tuple[dt.datetime, str]] = [
        (job.enqueued_at, _("Enqueued on queue %(queue)s") % {"queue": job.queue})
    ]
    for entry in job.errors:
        at = _parse(entry.get("at"))
        if at is None:
            continue
        if explain.is_crash(entry):
            text = _("Attempt %(attempt)s: worker %(worker)s lost")
        else:
            text = _("Attempt %(attempt)s failed on %(worker)s")
        text %= {"attempt": entry.get("attempt", "?"), "worker": entry.get("worker") or "?"}
        events.append((at, f"{text}: {first_line(explain.message(entry), 160)}"))
    if job.started_at:
        events.append((job.started_at, _("Latest attempt started")))
    if job.status == states.RUNNING and job.lease_until:
        events.append((job.lease_until, _("Lease held until (renewed while the worker lives)")))
    if job.finished_at:
        events.append((job.finished_at, _("Finished: %(status)s") % {"status": job.status}))
    if job.status == states.PENDING:
        events.append((job.run_at, _("Due")))
    events.sort(key=lambda event: event[0])
    rows = format_html_join(
        "", "<tr><td style='white-space:nowrap'>{}</td><td>{}</td></tr>", _rows(events)
    )
    return format_html('<table class="jobqueue-timeline">{}</table>', rows)


def unclaimed_notice(reason: str | None) -> str | None:
    """The sentence a pending job's page shows when no live worker would claim it (the
    reason is :func:`jobqueue.overview.why_unclaimed`'s), or ``None``."""
    if reason == overview.NO_WORKER:
        return _("No worker is running: this job waits until one starts (manage.py runjobs).")
    if reason == overview.UNREGISTERED:
        return _(
            "No live worker has registered this task, so none will claim this job. A worker "
            "claims only tasks it imported: define the task in an installed app's tasks.py or "
            'list its module in JOBQUEUE["TASK_MODULES"], then restart the workers.'
        )
    return None


def _rows(events: list[tuple[dt.datetime, str]]) -> list[tuple[SafeString, str]]:
    return [(moment(at), text) for at, text in events]


def _parse(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, dt.UTC)
