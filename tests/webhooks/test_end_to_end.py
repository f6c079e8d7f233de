"""Real worker processes deliver to a real receiver on 127.0.0.1; every request verified
with the ``standardwebhooks`` library."""

from __future__ import annotations

import signal

import pytest
import standardwebhooks
from django.db import transaction

from jobqueue.contrib.webhooks import send_event
from jobqueue.contrib.webhooks.models import Webhook
from jobqueue.models import Job
from tests.conftest import wait_for
from tests.webhooks.conftest import LOOPBACK
from tests.webhooks.receiver import Answer

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

# Loopback allowed for the worker only, and retries 0.2 s apart rather than 1 s, 5 s, ...
WORKER_SETTINGS = {**LOOPBACK, "BACKOFF": [0.2, 1, 0.2], "POLL_INTERVAL": 0.1}


def test_workers_deliver_signed_retried_and_current_webhooks(start_worker, receiver):
    paid = Webhook.objects.create(url=receiver.url("/paid"), events=["order.paid"])
    edited = Webhook.objects.create(url=receiver.url("/edited"), events=["*"])
    deleted = Webhook.objects.create(url=receiver.url("/deleted"), events=["*"])
    disabled = Webhook.objects.create(url=receiver.url("/disabled"), events=["*"])
    receiver.answers.append(Answer(500, body=b"try again"))  # the first request of all

    with transaction.atomic():
        jobs = send_event("order.paid", {"order": 7})
    with pytest.raises(RuntimeError), transaction.atomic():
        send_event("order.refunded", {"order": 7})
        raise RuntimeError("rolled back")
    by_hook = {job.kwargs["webhook_id"]: job for job in jobs}
    assert set(by_hook) == {paid.pk, edited.pk, deleted.pk, disabled.pk}
    old_secret = edited.secret
    edited.secret = ""
    edited.save()  # a new secret, between the enqueue and the delivery
    gone = deleted.pk
    deleted.delete()
    Webhook.objects.filter(pk=disabled.pk).update(active=False)

    worker = start_worker("--concurrency", "1", settings=WORKER_SETTINGS)

    wait_for(
        lambda: not Job.objects.filter(status__in=["pending", "running"]).exists(),
        timeout=30,
        interval=0.1,
        message="every delivery to finish",
    )
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0

    status = dict(Job.objects.values_list("id", "status"))
    assert {hook: status[job.pk] for hook, job in by_hook.items()} == {
        paid.pk: "succeeded",
        edited.pk: "succeeded",
        gone: "discarded",
        disabled.pk: "discarded",
    }
    assert Job.objects.count() == 4  # nothing of the rolled-back event

    # The workers claim in id order, so the 500 went to the first delivery, paid's.
    assert sorted(r.path for r in receiver.requests) == ["/edited", "/paid", "/paid"]
    first, second = [r for r in receiver.requests if r.path == "/paid"]
    for request in (first, second):
        payload = standardwebhooks.Webhook(paid.secret).verify(request.body, request.headers)
        assert payload["type"] == "order.paid" and payload["data"] == {"order": 7}
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.headers["webhook-id"] == by_hook[paid.pk].kwargs["delivery_id"]
    assert [first.headers["x-webhook-attempt"], second.headers["x-webhook-attempt"]] == ["1", "2"]

    [on_edited] = [r for r in receiver.requests if r.path == "/edited"]
    standardwebhooks.Webhook(edited.secret).verify(on_edited.body, on_edited.headers)
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(old_secret).verify(on_edited.body, on_edited.headers)
