"""``send_event``: one delivery job per active webhook that takes the event, in one INSERT."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.utils import timezone

from jobqueue.contrib.webhooks import signing
from jobqueue.contrib.webhooks.tasks import deliver
from jobqueue.tasks.arguments import bind_arguments, text_problem

if TYPE_CHECKING:
    from jobqueue.models import Job

MAX_EVENT_LENGTH = 255


def send_event(event: str, data: Any, *, using: str | None = None) -> list[Job]:
    """Enqueue a delivery of ``event`` with ``data`` to every active webhook that takes it.

    The jobs are inserted in the caller's transaction, all in one statement: a rollback
    sends nothing, and at commit the deliveries are visible to workers. Returns them, one
    per webhook, in the order of the webhooks' ids. ``using`` is the database the webhooks
    are read from (by default, where the routers say); the jobs go where every job goes.
    ``event`` and ``data`` are checked first, whether or not a webhook takes the event.
    """
    from jobqueue.contrib.webhooks.models import Webhook, subscribed

    _check_event(event)
    timestamp = timezone.now().isoformat()
    _check_data(event, data, timestamp)
    rows = Webhook.objects.db_manager(using).filter(active=True).values_list("id", "events")
    calls = [
        {
            "webhook_id": webhook_id,
            "event": event,
            "data": data,
            "delivery_id": signing.delivery_id(),
            "timestamp": timestamp,
            **({"database": using} if using is not None else {}),
        }
        for webhook_id, events in rows.order_by("id")
        if subscribed(events, event)
    ]
    # No idempotency key, so every call is inserted and none of the entries is None.
    return cast("list[Job]", deliver.enqueue_many(calls))


def _check_event(event: Any) -> None:
    if not isinstance(event, str) or not event or len(event) > MAX_EVENT_LENGTH:
        raise TypeError(
            f"send_event(): event must be a non-empty string of at most {MAX_EVENT_LENGTH} "
            f"characters, such as 'order.paid'; not {event!r}."
        )
    if event == "*":
        raise ValueError('send_event(): event "*" is the wildcard of Webhook.events, not an event.')
    problem = text_problem(event)
    if problem:
        raise ValueError(f"send_event(): event cannot be stored: it {problem}.")


def _check_data(event: str, data: Any, timestamp: str) -> None:
    # The enqueue's own rules (JSON, storable on every database), checked even when no
    # webhook takes the event: bad data must not pass until the day one subscribes.
    call = {
        "webhook_id": 0,
        "event": event,
        "data": data,
        "delivery_id": "",
        "timestamp": timestamp,
    }
    try:
        bind_arguments(deliver, (), call)
    except (TypeError, ValueError) as exc:
        message = str(exc).removeprefix(f"{deliver.name}: ")
        raise type(exc)(f"send_event(): {message}") from None
