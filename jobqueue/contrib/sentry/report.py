"""Send each failed attempt of a job to Sentry, tagged with its task, queue, id and attempt.

The hook is the public ``job_finished`` signal, sent once an attempt's outcome is written.
It names the job but carries no exception, so the receiver reads the job's row for the
error entry of that attempt: a signal for a success, a snooze, a discard or an attempt
whose entry is a crash's reports nothing. The exception itself is reported when it is at
hand: a handler's exception is written, and the signal sent, on the slot's own thread
while the worker handles it, so ``sys.exc_info()`` holds it, and Sentry gets its frames
and locals. It is used only when its type is the entry's, so a stale one is never sent.
When there is none (a timeout is recorded by the worker's main loop, not by the slot),
the entry itself is sent: its type, message and stored traceback text.

``sentry_sdk`` is imported when a failure is reported, not before: a project without it
still loads this app, and the system check ``jobqueue_sentry.E001`` says what is missing.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.core import checks

from jobqueue import signals, states
from jobqueue.store import explain
from jobqueue.store.errors import type_name

logger = logging.getLogger("jobqueue")

DISPATCH_UID = "jobqueue.contrib.sentry.report"
# Statuses an attempt's failure leaves a job in: retried (pending again) or failed for good.
FAILED_OUTCOMES = {states.PENDING: "retry", states.FAILED: "failed"}


def connect() -> None:
    """Report every failed attempt from now on; a second call changes nothing."""
    signals.job_finished.connect(report, dispatch_uid=DISPATCH_UID, weak=False)


def disconnect() -> None:
    signals.job_finished.disconnect(dispatch_uid=DISPATCH_UID)


def report(
    sender: Any, *, job_id: int, task_name: str, status: str, attempt: int, **kw: Any
) -> None:
    """The ``job_finished`` receiver: one Sentry event per failed attempt."""
    outcome = FAILED_OUTCOMES.get(status)
    if outcome is None:
        return
    try:
        found = _failure(job_id, attempt)
        if found is None:
            return  # a snooze or a crash's hand-back: nothing raised in this attempt
        queue, entry = found
        _send(
            entry,
            sys.exc_info()[1],
            tags={
                "jobqueue.task": task_name,
                "jobqueue.queue": queue,
                "jobqueue.job_id": str(job_id),
                "jobqueue.attempt": str(attempt),
                "jobqueue.outcome": outcome,
            },
            worker=kw.get("worker"),
        )
    except Exception:
        # The outcome is written; reporting it must not turn into a failure of its own.
        logger.exception("job %s (%s): reporting the failure to Sentry failed", job_id, task_name)


def _failure(job_id: int, attempt: int) -> tuple[str, dict[str, Any]] | None:
    """The job's queue and the error entry of ``attempt``, or None if it has none."""
    # Imported here: this module loads with the app, before the registry is ready.
    from jobqueue.models import Job

    row = Job.objects.filter(pk=job_id).values_list("queue", "errors").first()
    if row is None:
        return None
    queue, errors = row
    for entry in reversed(errors or []):
        if entry.get("attempt") == attempt and entry.get("type") != explain.WORKER_LOST:
            return queue, entry
    return None


def _send(
    entry: dict[str, Any], raised: BaseException | None, *, tags: dict[str, str], worker: Any
) -> None:
    import sentry_sdk

    with sentry_sdk.new_scope() as scope:
        for key, value in tags.items():
            scope.set_tag(key, value)
        scope.set_context("jobqueue", {"worker": worker, "error_at": entry.get("at")})
        if raised is not None and type_name(type(raised)) == entry.get("type"):
            sentry_sdk.capture_exception(raised)
            return
        sentry_sdk.capture_event(
            {
                "level": "error",
                "message": f"{entry.get('type')}: {entry.get('message')}",
                "exception": {
                    "values": [{"type": entry.get("type"), "value": entry.get("message")}]
                },
                "extra": {"traceback": entry.get("traceback")},
            }
        )


def check_sentry_sdk(**kwargs: Any) -> list[checks.CheckMessage]:
    try:
        import sentry_sdk  # noqa: F401
    except ImportError:
        return [
            checks.Error(
                '"jobqueue.contrib.sentry" is in INSTALLED_APPS but sentry_sdk cannot be '
                "imported: no failure would be reported.",
                hint="Install it with: pip install sentry-sdk",
                id="jobqueue_sentry.E001",
            )
        ]
    return []
