"""send_event: which webhooks get a delivery, what the job stores, and one INSERT for all."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobqueue.contrib.webhooks import send_event
from jobqueue.contrib.webhooks.models import Webhook
from jobqueue.contrib.webhooks.tasks import DELIVERY_TASK
from jobqueue.models import Job
from jobqueue.testing import capture

pytestmark = pytest.mark.django_db

URL = "https://partner.example/hooks"


def test_one_delivery_per_active_webhook_that_takes_the_event():
    paid = Webhook.objects.create(url=URL, events=["order.paid"])
    everything = Webhook.objects.create(url=URL, events=["*"])
    Webhook.objects.create(url=URL, events=["order.refunded"])
    Webhook.objects.create(url=URL, events=["order.paid"], active=False)
    Webhook.objects.create(url=URL, events=[])

    jobs = send_event("order.paid", {"order": 7})

    assert [job.kwargs["webhook_id"] for job in jobs] == [paid.pk, everything.pk]
    assert Job.objects.filter(task_name=DELIVERY_TASK).count() == 2


def test_the_job_stores_the_webhook_id_event_data_delivery_id_and_time_only():
    hook = Webhook.objects.create(url=URL, events=["order.paid"])
    [job] = send_event("order.paid", {"order": 7, "lines": [1, 2]})

    row = Job.objects.get(pk=job.pk)
    assert row.args == []
    assert set(row.kwargs) == {"webhook_id", "event", "data", "delivery_id", "timestamp"}
    assert row.kwargs["webhook_id"] == hook.pk
    assert (row.kwargs["event"], row.kwargs["data"]) == (
        "order.paid",
        {"order": 7, "lines": [1, 2]},
    )
    assert row.kwargs["delivery_id"].startswith("msg_") and len(row.kwargs["delivery_id"]) > 12
    assert dt.datetime.fromisoformat(row.kwargs["timestamp"]).tzinfo is not None


def test_each_delivery_has_its_own_id():
    for _ in range(3):
        Webhook.objects.create(url=URL, events=["*"])
    jobs = send_event("order.paid", {}) + send_event("order.paid", {})
    assert len({job.kwargs["delivery_id"] for job in jobs}) == 6


def test_a_hundred_webhooks_cost_one_insert():
    Webhook.objects.bulk_create(Webhook(url=URL, events=["order.paid"]) for _ in range(100))

    with CaptureQueriesContext(connection) as queries:
        jobs = send_event("order.paid", {"order": 7})

    assert len(jobs) == 100 and all(job.pk for job in jobs)
    inserts = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("INSERT")]
    assert len(inserts) == 1
    # Besides it, only the read of the webhooks.
    assert len(queries) == 2
    assert Job.objects.filter(task_name=DELIVERY_TASK).count() == 100


def test_no_webhook_no_statement_but_the_read():
    with CaptureQueriesContext(connection) as queries:
        assert send_event("order.paid", {"order": 7}) == []
    assert len(queries) == 1


def test_the_deliveries_are_captured_like_any_enqueue():
    Webhook.objects.create(url=URL, events=["*"])
    with capture() as captured:
        send_event("order.paid", {"order": 7})
    [enqueued] = captured.assert_enqueued(DELIVERY_TASK)
    assert enqueued.kwargs["data"] == {"order": 7}


@pytest.mark.parametrize(
    ("event", "error", "message"),
    [
        ("", TypeError, "event must be a non-empty string"),
        (None, TypeError, "event must be a non-empty string"),
        (7, TypeError, "event must be a non-empty string"),
        ("x" * 256, TypeError, "at most 255 characters"),
        ("*", ValueError, 'event "*" is the wildcard'),
        ("order\x00paid", ValueError, "event cannot be stored: it contains a NUL byte"),
    ],
)
def test_a_bad_event_is_refused_naming_it(event, error, message):
    Webhook.objects.create(url=URL, events=["*"])
    with pytest.raises(error, match="^send_event\\(\\): ") as excinfo:
        send_event(event, {})
    assert message in str(excinfo.value)
    assert not Job.objects.exists()


@pytest.mark.parametrize("subscribers", [0, 1])
@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ({"when": dt.date(2026, 12, 1)}, TypeError, "argument 'data'['when'] is not JSON"),
        ({"total": math.nan}, TypeError, "argument 'data'['total'] is not JSON"),
        ({1: "a"}, TypeError, "argument 'data' is not JSON"),
        ({"note": "a\x00b"}, ValueError, "argument 'data'['note'] cannot be stored"),
        (object(), TypeError, "argument 'data' is not JSON"),
    ],
)
def test_bad_data_is_refused_naming_the_argument_with_or_without_subscribers(
    data, error, message, subscribers
):
    for _ in range(subscribers):
        Webhook.objects.create(url=URL, events=["*"])
    with pytest.raises(error, match="^send_event\\(\\): ") as excinfo:
        send_event("order.paid", data)
    assert message in str(excinfo.value)
    assert not Job.objects.exists()
