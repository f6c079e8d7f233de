"""The delivery task: one job per (event, webhook), one signed POST per attempt.

The job holds the webhook's id, the event, its data, the delivery's id and the event's
time; the webhook itself (URL, secret, whether it is on) is read when each attempt runs.
How the receiver's answer ends the attempt:

- 2xx: success; the status, the duration and the head of the body are the job's result.
- 408, 429, 5xx, or the receiver could not be reached: the attempt fails and the job retries
  after the task's backoff (``JOBQUEUE["BACKOFF"]``). A ``Retry-After`` on a 429 or 503 that
  asks for longer than that is honoured with ``Snooze``.
- any other 4xx: ``PermanentError``, failed at once; a redirect or an address the SSRF guard
  refuses (:mod:`jobqueue.contrib.webhooks.guard`) likewise, after this one attempt.
- the webhook was deleted, switched off or no longer takes the event: ``Discard``, and
  nothing is sent.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import re
import time
from typing import Any

from django.utils import timezone

from jobqueue import Discard, PermanentError, Snooze, conf, task
from jobqueue.contrib.webhooks import signing
from jobqueue.store.errors import storable_text

DELIVERY_TASK = "jobqueue.contrib.webhooks.deliver"
QUEUE = "webhooks"
# With the default BACKOFF (1, 5, 3600): retries after 1 s, 5 s, 25 s, 125 s, 625 s, 3125 s
# and 3600 s, so a receiver may be away for about two hours before a delivery fails.
MAX_ATTEMPTS = 8
RESPONSE_LIMIT = 4096  # bytes of a response body read, and kept for the operator
ERROR_BODY_LIMIT = 500  # characters of it quoted in an error message
RETRY_AFTER_LIMIT = 3600  # s: a longer Retry-After is waited for this long
# A Snooze does not count as an attempt, so a receiver that answers 429 forever would be
# asked forever; past this age a delivery's 429s and 503s are failed attempts like any other.
SNOOZE_WINDOW = 86400
RETRY_AFTER_STATUSES = (429, 503)

# The first words of every error this task records about a response, which the admin
# reads back to show the last response's status and duration.
RESPONSE_LINE = re.compile(r"^HTTP (?P<status>\d{3}) in (?P<duration>\d+(?:\.\d+)?) s\b")


class DeliveryFailed(Exception):
    """The receiver answered 408, 429 or 5xx, or could not be reached: retried."""


class DeliveryRejected(PermanentError):
    """The receiver answered another 4xx: failed at once, with the status in the message."""


class DeliveryRefused(PermanentError):
    """The SSRF guard refused the address, or the receiver answered with a redirect."""


@task(name=DELIVERY_TASK, queue=QUEUE, max_attempts=MAX_ATTEMPTS, takes_context=True)
def deliver(
    ctx: Any,
    webhook_id: int,
    event: str,
    data: Any,
    delivery_id: str,
    timestamp: str,
    database: str | None = None,
) -> dict[str, Any]:
    """POST one event to one webhook, as it is now."""
    # Imported here: httpx is an extra, and a web process that only enqueues, or a worker
    # discovering tasks, must not need it (the app's system check says when it is missing).
    import httpx

    from jobqueue.contrib.webhooks.models import Webhook
    from jobqueue.contrib.webhooks.transport import Refused, post

    webhook = Webhook.objects.db_manager(database).filter(pk=webhook_id).first()
    if webhook is None:
        raise Discard(f"webhook {webhook_id} was deleted; nothing was sent")
    if not webhook.active:
        raise Discard(f"webhook {webhook_id} is disabled; nothing was sent")
    if not webhook.subscribes_to(event):
        raise Discard(f"webhook {webhook_id} no longer takes {event!r} events; nothing was sent")

    body = payload(event, timestamp, data)
    sent_at = int(time.time())
    try:
        signature = signing.sign(webhook.secret, delivery_id, sent_at, body)
    except ValueError as exc:
        raise PermanentError(f"webhook {webhook_id} has a broken secret: {exc}") from None
    headers = {
        "Content-Type": "application/json",
        "webhook-id": delivery_id,
        "webhook-timestamp": str(sent_at),
        "webhook-signature": signature,
        "X-Webhook-Attempt": str(ctx.attempt),
    }
    settings = conf.get().webhooks
    try:
        response = post(
            webhook.url,
            body=body,
            headers=headers,
            timeout=settings.timeout,
            allow_networks=settings.allow_networks,
            max_body=RESPONSE_LIMIT,
        )
    except Refused as exc:
        raise DeliveryRefused(str(exc)) from None
    except httpx.TransportError as exc:
        raise DeliveryFailed(
            f"could not reach webhook {webhook_id}: {type(exc).__name__}: {exc}"
        ) from None

    status = response.status
    text = storable_text(response.body.decode("utf-8", errors="replace"), RESPONSE_LIMIT)
    line = f"HTTP {status} in {response.elapsed:.3f} s"
    if 200 <= status < 300:
        return {"status": status, "duration": round(response.elapsed, 3), "body": text}
    quoted = f"{line}: {text[:ERROR_BODY_LIMIT]}" if text else line
    if status in (408, 429) or status >= 500:
        if status in RETRY_AFTER_STATUSES:
            snooze_for(response.headers.get("Retry-After"), ctx, timestamp)
        raise DeliveryFailed(quoted)
    raise DeliveryRejected(quoted)


def payload(event: str, timestamp: str, data: Any) -> bytes:
    """The request body, serialised once per attempt: exactly the bytes that are signed."""
    message = {"type": event, "timestamp": timestamp, "data": data}
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def snooze_for(retry_after: str | None, ctx: Any, timestamp: str) -> None:
    """Raise ``Snooze`` when the receiver asks to wait longer than the backoff would."""
    wait = retry_after_seconds(retry_after, timezone.now())
    if wait is None:
        return
    wait = min(wait, RETRY_AFTER_LIMIT)
    job = ctx.job
    backoff = deliver.backoff_delay(ctx.attempt) if ctx.attempt < job.max_attempts else 0.0
    if wait <= backoff:
        return
    age = (timezone.now() - dt.datetime.fromisoformat(timestamp)).total_seconds()
    if age + wait > SNOOZE_WINDOW:
        return
    raise Snooze(wait)


def retry_after_seconds(value: str | None, now: dt.datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks for (a number or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, says RFC 5322
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - now).total_seconds())
