"""Paused queues: the claim statements leave them out, on every database; a resume wakes
the workers that serve them."""

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from jobqueue import signals
from jobqueue.models import Job, QueuePause
from jobqueue.sql import Queries
from jobqueue.store import pauses
from jobqueue.store.jobs import ClaimScope, Store
from tests.conftest import listen_for_jobs, notifications
from tests.factories import FinishedJobFactory, JobFactory
from tests.storage.test_claim import ADD, _claim_params, _plan, claim
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_claim_skips_a_paused_queue_and_takes_it_again_once_resumed():
    emails = JobFactory(queue="emails")
    feeds = JobFactory(queue="feeds")
    assert pauses.pause(["emails"], by="test").changed == ["emails"]
    assert [j.id for j in claim()] == [feeds.id]
    assert claim() == []
    assert Job.objects.get(pk=emails.pk).status == "pending"
    assert pauses.resume(["emails"]).changed == ["emails"]
    assert [j.id for j in claim()] == [emails.id]


def test_a_paused_queue_is_still_enqueued_to():
    pauses.pause(["default"])
    job = tasks.add.enqueue(1, 2)
    assert Job.objects.get(pk=job.pk).status == "pending"
    assert claim() == []


def test_the_next_due_time_and_the_due_count_leave_a_paused_queue_out():
    # An idle worker sleeps until next_due says: a paused queue's due job must not make it
    # wake at once, again and again.
    JobFactory(queue="emails")
    JobFactory(queue="feeds", run_at=timezone.now() + dt.timedelta(seconds=60))
    pauses.pause(["emails"])
    store = Store()
    scope = ClaimScope("w1", (ADD,), None)
    looked = store.record([], scope=scope, limit=2)  # the claim that found nothing
    assert looked == [] and 55 < looked.next_due <= 60
    assert 55 < store.next_due(task_names=[ADD], queues=None) <= 60
    assert store.count_due(task_names=[ADD], queues=None, limit=10) == 0
    pauses.pause(["feeds"])
    assert store.record([], scope=scope, limit=2).next_due is None
    assert store.next_due(task_names=[ADD], queues=None) is None
    pauses.resume(["emails", "feeds"])
    assert store.count_due(task_names=[ADD], queues=None, limit=10) == 1


def test_pausing_twice_keeps_the_first_pause_and_resuming_twice_changes_nothing():
    first = pauses.pause(["emails", "emails"], by="ada")
    assert (first.changed, first.unchanged) == (["emails"], [])
    again = pauses.pause(["emails", "feeds"], by="bob")
    assert (again.changed, again.unchanged) == (["feeds"], ["emails"])
    assert QueuePause.objects.get(queue="emails").paused_by == "ada"
    assert sorted(pauses.paused()) == ["emails", "feeds"]
    assert pauses.resume(["emails"]).changed == ["emails"]
    resumed = pauses.resume(["emails", "nothing"])
    assert (resumed.changed, resumed.unchanged) == ([], ["emails", "nothing"])
    assert pauses.is_paused("feeds") and not pauses.is_paused("emails")


@pytest.mark.parametrize("name", ["", "x" * 101])
def test_a_queue_name_that_cannot_be_one_is_refused(name):
    with pytest.raises(ValueError, match="not a queue name"):
        pauses.pause([name])


def test_pause_and_resume_send_their_signals_and_resume_wakes_this_process():
    seen = []

    def receiver(signal_name):
        return lambda sender, **kwargs: seen.append((signal_name, kwargs))

    paused, resumed, committed = receiver("paused"), receiver("resumed"), receiver("committed")
    signals.queue_paused.connect(paused)
    signals.queue_resumed.connect(resumed)
    signals.jobs_committed.connect(committed)
    try:
        pauses.pause(["emails"], by="ada")
        pauses.pause(["emails"], by="ada")  # already paused: no signal
        pauses.resume(["emails"])
        pauses.resume(["emails"])  # not paused: no signal, no wake
    finally:
        signals.queue_paused.disconnect(paused)
        signals.queue_resumed.disconnect(resumed)
        signals.jobs_committed.disconnect(committed)
    assert seen == [
        (
            "paused",
            {
                "signal": signals.queue_paused,
                "using": "default",
                "queues": ["emails"],
                "paused_by": "ada",
            },
        ),
        ("committed", {"signal": signals.jobs_committed, "queue": "emails", "database": "default"}),
        ("resumed", {"signal": signals.queue_resumed, "using": "default", "queues": ["emails"]}),
    ]


def test_a_resume_notifies_the_workers_channel_with_the_queue(postgresql_only):
    listener = listen_for_jobs()
    try:
        pauses.pause(["emails", "feeds"])
        assert notifications(listener) == []  # a pause wakes nobody
        pauses.resume(["emails", "feeds"])
        assert sorted(notifications(listener)) == [("jobqueue", "emails"), ("jobqueue", "feeds")]
        pauses.resume(["emails"])
        assert notifications(listener) == []
    finally:
        listener.close()


def test_with_a_queue_paused_the_claim_still_reads_its_partial_index(postgresql_only):
    # One queue holds every job: the planner's statistics on queue must not make it think
    # that no row passes the pause check (and so read and sort every due row instead).
    FinishedJobFactory._meta.model.objects.bulk_create(
        [Job(task_name=ADD, status="succeeded", finished_at=timezone.now()) for _ in range(20_000)]
    )
    JobFactory.create_batch(20)
    pauses.pause(["emails"])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_queuepause")
    q = Queries("default")
    plan = _plan(q.statements["claim"], _claim_params(q, limit=4))
    due_part = plan.split("CTE due", 1)[1].split("CTE flow_keys", 1)[0]
    assert "Index Scan using jobqueue_job_claim" in due_part, plan
    assert "Sort" not in due_part, plan
