"""What the admin shows of a webhook's deliveries: jobs of the delivery task, read only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from jobqueue.contrib.webhooks.tasks import DELIVERY_TASK, RESPONSE_LINE
from jobqueue.models import Job

RECENT = 20


@dataclass(frozen=True)
class Delivery:
    job: Job
    event: str
    response: str  # "200 in 0.012 s", or "" when no answer was recorded


def of_webhook(webhook_id: int, *, limit: int = RECENT, using: str | None = None) -> QuerySet[Job]:
    """The delivery jobs of one webhook, newest first.

    Found by the webhook id in the job's kwargs, a JSON lookup that SQLite and PostgreSQL
    both run. No index serves it: it reads the delivery task's rows, which retention keeps
    few enough for one admin page.
    """
    jobs = Job.objects.using(using) if using else Job.objects.all()
    return jobs.filter(task_name=DELIVERY_TASK, kwargs__webhook_id=webhook_id).order_by("-id")[
        :limit
    ]


def recent(webhook_id: int, *, limit: int = RECENT, using: str | None = None) -> list[Delivery]:
    return [
        Delivery(job, str((job.kwargs or {}).get("event", "")), last_response(job))
        for job in of_webhook(webhook_id, limit=limit, using=using)
    ]


def last_response(job: Job) -> str:
    """The status and duration of the last answer the receiver gave, as recorded."""
    result: Any = job.result
    if isinstance(result, dict) and "status" in result and "duration" in result:
        return f"{result['status']} in {result['duration']} s"
    # The last attempt's error, if it got an answer; a network error or a refusal has none.
    entry = job.errors[-1] if job.errors else None
    message = entry.get("message", "") if isinstance(entry, dict) else ""
    match = RESPONSE_LINE.match(str(message))
    return f"{match['status']} in {match['duration']} s" if match else ""
