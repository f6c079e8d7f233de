"""Deliveries run by the worker's own code in the test process (``run_jobs``), to a real
HTTP receiver on 127.0.0.1, every request verified with the ``standardwebhooks`` library."""

from __future__ import annotations

import datetime as dt
import email.utils
import json

import pytest
import standardwebhooks
from django.db import connection, transaction
from django.utils import timezone

from jobqueue.contrib.webhooks import send_event
from jobqueue.contrib.webhooks.models import Webhook
from jobqueue.contrib.webhooks.tasks import (
    DELIVERY_TASK,
    MAX_ATTEMPTS,
    QUEUE,
    RESPONSE_LIMIT,
    retry_after_seconds,
)
from jobqueue.models import Job
from jobqueue.testing import run_jobs
from tests.webhooks.receiver import Answer, Receiver

pytestmark = pytest.mark.django_db


def verified(request, secret: str) -> dict:
    """The payload of a request, once ``standardwebhooks`` has accepted its signature."""
    return standardwebhooks.Webhook(secret).verify(request.body, request.headers)


@pytest.fixture
def hook(receiver: Receiver, allow_loopback: None) -> Webhook:
    return Webhook.objects.create(url=receiver.url(), events=["order.paid"])


def test_a_delivery_is_a_signed_standard_webhooks_request(hook, receiver):
    [job] = send_event("order.paid", {"order": 7, "total": "12.50"})
    assert (job.task_name, job.queue, job.max_attempts) == (DELIVERY_TASK, QUEUE, MAX_ATTEMPTS)

    run = run_jobs()

    assert run.succeeded == [job.pk]
    [request] = receiver.requests
    payload = verified(request, hook.secret)
    assert payload["type"] == "order.paid" and payload["data"] == {"order": 7, "total": "12.50"}
    assert dt.datetime.fromisoformat(payload["timestamp"]) <= timezone.now()
    assert request.method == "POST" and request.path == "/hook"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-id"] == job.kwargs["delivery_id"]
    assert request.headers["webhook-id"].startswith("msg_")
    assert request.headers["x-webhook-attempt"] == "1"
    assert request.headers["webhook-signature"].startswith("v1,")
    # The whole body is the three keys, no more.
    assert set(json.loads(request.body)) == {"type", "timestamp", "data"}
    row = Job.objects.get(pk=job.pk)
    assert (row.result["status"], row.result["body"]) == (200, "ok")
    assert row.result["duration"] >= 0


def test_a_signature_made_with_another_secret_does_not_verify(hook, receiver):
    send_event("order.paid", {"order": 7})
    run_jobs()
    [request] = receiver.requests
    other = Webhook.objects.create(url=receiver.url(), events=[], active=False)
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        verified(request, other.secret)


def test_a_retry_after_a_500_keeps_the_delivery_id_and_counts_the_attempt(hook, receiver):
    receiver.answers.append(Answer(500, body=b"database down"))
    [job] = send_event("order.paid", {"order": 7})

    run = run_jobs()

    assert run.succeeded == [job.pk]
    first, second = receiver.requests
    assert verified(first, hook.secret) == verified(second, hook.secret)
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == job.kwargs["delivery_id"]
    assert [first.headers["x-webhook-attempt"], second.headers["x-webhook-attempt"]] == ["1", "2"]
    # The same body each time; the signature covers each attempt's own timestamp.
    assert first.body == second.body
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.result["status"]) == ("succeeded", 2, 200)
    [error] = row.errors
    assert error["type"] == "jobqueue.contrib.webhooks.tasks.DeliveryFailed"
    assert error["message"].startswith("HTTP 500 in ") and "database down" in error["message"]


@pytest.mark.parametrize("status", [408, 429, 502, 503])
def test_these_statuses_are_retried(hook, receiver, status):
    receiver.answers.append(Answer(status))
    [job] = send_event("order.paid", {"order": 7})
    run_jobs()
    assert Job.objects.get(pk=job.pk).status == "succeeded"
    assert len(receiver.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422])
def test_another_4xx_fails_at_once_with_the_status(hook, receiver, status):
    receiver.answers.append(Answer(status, body=b"no such hook"))
    [job] = send_event("order.paid", {"order": 7})

    run = run_jobs()

    assert run.failed == [job.pk]
    assert len(receiver.requests) == 1
    row = Job.objects.get(pk=job.pk)
    assert row.attempts == 1
    assert row.last_error.startswith(
        f"jobqueue.contrib.webhooks.tasks.DeliveryRejected: HTTP {status} in "
    )
    assert "no such hook" in row.last_error


def test_a_redirect_fails_at_once_and_is_not_followed(hook, receiver):
    receiver.answers.append(Answer(302, headers={"Location": receiver.url("/elsewhere")}))
    [job] = send_event("order.paid", {"order": 7})

    run = run_jobs()

    assert run.failed == [job.pk]
    assert [r.path for r in receiver.requests] == ["/hook"]
    row = Job.objects.get(pk=job.pk)
    assert row.attempts == 1
    assert "DeliveryRefused" in row.last_error and "redirect" in row.last_error


def test_an_unreachable_receiver_is_retried(hook, receiver):
    hook.url = receiver.url()
    receiver.stop()  # nothing listens on its port any more
    hook.save()
    [job] = send_event("order.paid", {"order": 7})

    run_jobs(advance=False)

    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts) == ("pending", 1)
    assert row.last_error.startswith(
        "jobqueue.contrib.webhooks.tasks.DeliveryFailed: could not reach webhook"
    )


def test_an_internal_address_is_refused_after_one_attempt_and_nothing_is_sent(receiver):
    # No allow_loopback: the test settings, like a project's defaults, allow no internal
    # network.
    hook = Webhook.objects.create(url=receiver.url(), events=["*"])
    [job] = send_event("order.paid", {"order": 7})

    run = run_jobs()

    assert run.failed == [job.pk] and Job.objects.get(pk=job.pk).attempts == 1
    assert receiver.connections == 0 and receiver.requests == []
    row = Job.objects.get(pk=job.pk)
    assert row.last_error.startswith("jobqueue.contrib.webhooks.tasks.DeliveryRefused: ")
    assert "loopback" in row.last_error
    assert hook.secret not in row.last_error


def test_429_with_a_longer_retry_after_snoozes_without_counting_the_attempt(hook, receiver):
    receiver.answers.append(Answer(429, headers={"Retry-After": "120"}))
    [job] = send_event("order.paid", {"order": 7})

    run_jobs(advance=False)

    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.errors) == ("pending", 0, [])
    assert (row.run_at - row.updated_at).total_seconds() == pytest.approx(120, abs=1)

    run = run_jobs()

    assert run.succeeded == [job.pk]
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    # A snooze gives the attempt back, so the request after it carries the same number.
    assert [first.headers["x-webhook-attempt"], second.headers["x-webhook-attempt"]] == ["1", "1"]


def test_503_with_an_http_date_retry_after_snoozes(hook, receiver):
    later = email.utils.format_datetime(timezone.now() + dt.timedelta(seconds=300), usegmt=True)
    receiver.answers.append(Answer(503, headers={"Retry-After": later}))
    [job] = send_event("order.paid", {"order": 7})

    run_jobs(advance=False)

    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts) == ("pending", 0)
    assert (row.run_at - row.updated_at).total_seconds() == pytest.approx(300, abs=2)


def test_a_retry_after_shorter_than_the_backoff_is_an_ordinary_retry(hook, receiver):
    # The first retry waits BACKOFF's first delay, 1 s: a Retry-After of 0 asks for less.
    receiver.answers.append(Answer(429, headers={"Retry-After": "0"}))
    [job] = send_event("order.paid", {"order": 7})

    run_jobs(advance=False)

    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts) == ("pending", 1)
    assert row.last_error.startswith("jobqueue.contrib.webhooks.tasks.DeliveryFailed: HTTP 429")


def test_retry_after_is_read_as_seconds_or_an_http_date():
    now = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    assert retry_after_seconds("120", now) == 120
    assert retry_after_seconds("Tue, 01 Dec 2026 12:02:00 GMT", now) == 120
    assert retry_after_seconds("Tue, 01 Dec 2026 11:00:00 GMT", now) == 0
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds("", now) is None
    assert retry_after_seconds(None, now) is None


def test_the_response_body_kept_is_capped(hook, receiver):
    receiver.answers.append(Answer(200, body=b"x" * (RESPONSE_LIMIT * 3)))
    [job] = send_event("order.paid", {"order": 7})
    run_jobs()
    assert len(Job.objects.get(pk=job.pk).result["body"]) <= RESPONSE_LIMIT


@pytest.mark.django_db(transaction=True)
def test_a_rollback_sends_nothing(hook, receiver):
    with pytest.raises(RuntimeError), transaction.atomic():
        send_event("order.paid", {"order": 7})
        raise RuntimeError("the order could not be saved")

    run = run_jobs()

    assert run.outcomes == [] and not Job.objects.exists()
    assert receiver.requests == []


def test_an_edited_webhook_delivers_as_it_is_now(hook, receiver):
    old_secret = hook.secret
    assert len(send_event("order.paid", {"order": 7})) == 1
    hook.secret = ""  # a new one is generated on save
    hook.url = receiver.url("/moved")
    hook.save()
    assert hook.secret and hook.secret != old_secret

    run_jobs()

    [request] = receiver.requests
    assert request.path == "/moved"
    assert verified(request, hook.secret)["data"] == {"order": 7}
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        verified(request, old_secret)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda hook: hook.delete(), "was deleted"),
        (lambda hook: Webhook.objects.filter(pk=hook.pk).update(active=False), "is disabled"),
        (
            lambda hook: Webhook.objects.filter(pk=hook.pk).update(events=["order.refunded"]),
            "no longer takes 'order.paid' events",
        ),
    ],
    ids=["deleted", "disabled", "unsubscribed"],
)
def test_a_delivery_to_a_gone_webhook_is_discarded_and_sends_nothing(
    hook, receiver, change, reason
):
    webhook_id = hook.pk
    [job] = send_event("order.paid", {"order": 7})
    change(hook)

    run = run_jobs()

    assert [o.status for o in run.outcomes] == ["discarded"]
    assert receiver.connections == 0
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts) == ("discarded", 1)
    assert row.last_error == (
        f"jobqueue.exceptions.Discard: webhook {webhook_id} {reason}; nothing was sent"
    )


def test_the_job_row_holds_neither_the_secret_nor_the_url(hook, receiver):
    receiver.answers.append(Answer(500))
    send_event("order.paid", {"order": 7})
    run_jobs()
    assert Job.objects.get().status == "succeeded"  # after a failed attempt and its error
    Webhook.objects.create(url=receiver.url("/other"), events=["*"])
    send_event("order.paid", {"order": 8})  # and a pending one
    secret_key = hook.secret.removeprefix("whsec_")

    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM jobqueue_job")
        rows = cursor.fetchall()

    assert len(rows) == 3
    texts = [str(value) for row in rows for value in row]
    assert not [t for t in texts if secret_key in t or "whsec_" in t]
    assert not [t for t in texts if f"127.0.0.1:{receiver.port}" in t]
