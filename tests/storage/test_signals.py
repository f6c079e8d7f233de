"""The signals of recovery, hand-back and pruning: sent by the store once the statement has
committed, with what a receiver needs to count them; nothing when nothing matched."""

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from jobqueue import signals
from jobqueue.models import Job
from jobqueue.signals import RecoveredJob
from jobqueue.store.jobs import Store
from tests.factories import FinishedJobFactory, JobFactory

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.testapp.tasks.add"
WATCHED = {
    "jobs_recovered": signals.jobs_recovered,
    "jobs_handed_back": signals.jobs_handed_back,
    "jobs_pruned": signals.jobs_pruned,
    "job_finished": signals.job_finished,
}


@pytest.fixture
def sent() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """``(signal name, keyword arguments)`` of each watched signal sent, in order."""
    received: list[tuple[str, dict[str, Any]]] = []
    for name, signal in WATCHED.items():

        def receiver(sender: Any, signal: Any, name: str = name, **kwargs: Any) -> None:
            assert sender is Store
            received.append((name, kwargs))

        signal.connect(receiver, weak=False, dispatch_uid=f"test-{name}")
    try:
        yield received
    finally:
        for name, signal in WATCHED.items():
            signal.disconnect(dispatch_uid=f"test-{name}")


def claim(worker: str = "w1", limit: int = 1, ahead: int = 0, queue: str = "default") -> list:
    JobFactory.create_batch(limit + ahead, queue=queue)
    return Store().claim(worker=worker, task_names=[ADD], queues=None, limit=limit, ahead=ahead)


def expire(*jobs: Any) -> None:
    past = timezone.now() - dt.timedelta(seconds=5)
    Job.objects.filter(pk__in=[j.id for j in jobs]).update(lease_until=past)


def test_a_rescue_of_an_expired_lease_names_each_job_its_status_and_its_crash(sent):
    [retried] = claim(queue="emails")
    [parked] = claim()
    Job.objects.filter(pk=parked.id).update(on_crash="park")
    expire(retried, parked)
    Store().rescue_expired()
    [(name, kwargs)] = sent  # one statement, one signal; and no job_finished
    assert name == "jobs_recovered"
    assert sorted(kwargs["jobs"]) == [
        RecoveredJob(retried.id, ADD, "emails", "pending", crashed=True),
        RecoveredJob(parked.id, ADD, "default", "abandoned", crashed=True),
    ]
    assert kwargs["worker"] is None  # any worker whose lease ran out
    assert kwargs["reason"].startswith("The worker stopped renewing its lease")
    assert kwargs["using"] == "default"


def test_a_dead_workers_held_job_goes_back_with_no_crash_its_started_one_with_one(sent):
    started, held = claim(worker="dead:1:x", limit=1, ahead=1)
    assert held.held and not started.held
    Store().release_worker("dead:1:x", "The worker process 1 died (killed by SIGKILL).")
    [(name, kwargs)] = sent
    assert name == "jobs_recovered"
    assert sorted(kwargs["jobs"]) == [
        RecoveredJob(started.id, ADD, "default", "pending", crashed=True),
        RecoveredJob(held.id, ADD, "default", "pending", crashed=False),
    ]
    assert (kwargs["worker"], kwargs["reason"]) == (
        "dead:1:x",
        "The worker process 1 died (killed by SIGKILL).",
    )
    # What a counter of recoveries needs, without counting anything twice.
    assert [job.crashed for job in kwargs["jobs"]].count(True) == 1
    assert Job.objects.get(pk=started.id).crashes == 1
    assert Job.objects.get(pk=held.id).crashes == 0


def test_a_stopping_worker_releases_what_it_still_runs(sent):
    [job] = claim()
    Store().release("w1", [job.token], "Stopped.")
    assert sent == [
        (
            "jobs_recovered",
            {
                "jobs": [RecoveredJob(job.id, ADD, "default", "pending", crashed=True)],
                "reason": "Stopped.",
                "worker": "w1",
                "using": "default",
            },
        )
    ]


def test_an_unclaim_names_the_jobs_handed_back(sent):
    held = claim(limit=0, ahead=2)
    assert Store().unclaim("w2", [j.token for j in held], "held for over 1 s") == set()
    assert sent == []  # another worker's jobs: nothing handed back
    Store().unclaim("w1", [j.token for j in held], "held for over 1 s")
    assert sent == [
        (
            "jobs_handed_back",
            {
                "job_ids": sorted(j.id for j in held),
                "worker": "w1",
                "reason": "held for over 1 s",
                "using": "default",
            },
        )
    ]


def test_a_prune_counts_what_it_deleted_by_status(settings, sent):
    settings.JOBQUEUE = {"RETENTION": {"succeeded": 3600, "failed": 3600}}
    old = timezone.now() - dt.timedelta(hours=2)
    FinishedJobFactory.create_batch(3, finished_at=old)
    FinishedJobFactory(status="failed")  # recent: kept
    store = Store()
    assert store.prune() == {"succeeded": 3, "failed": 0, "discarded": 0}
    # Only the statuses with rows deleted.
    assert sent == [("jobs_pruned", {"deleted": {"succeeded": 3}, "using": "default"})]
    sent.clear()
    store.prune()
    assert sent == []


def test_a_prune_in_slices_sends_one_signal_per_slice(settings, sent):
    settings.JOBQUEUE = {"RETENTION": {"succeeded": 3600}}
    old = timezone.now() - dt.timedelta(hours=2)
    Job.objects.bulk_create(
        [Job(task_name="x", status="succeeded", finished_at=old) for _ in range(1500)]
    )
    store = Store()
    store.prune(max_batches=1)
    store.prune(max_batches=1)
    assert [kwargs["deleted"] for _, kwargs in sent] == [{"succeeded": 1000}, {"succeeded": 500}]


def test_nothing_matched_sends_nothing(sent):
    [live] = claim()
    store = Store()
    assert store.rescue_expired() == []  # its lease runs
    assert store.release_worker("nobody:1:x", "The worker died.") == []
    assert store.release("w1", [], "Stopped.") == []
    assert store.release("w1", ["0" * 32], "Stopped.") == []
    assert store.unclaim("w1", ["0" * 32]) == set()
    assert store.prune() == {"succeeded": 0, "failed": 0, "discarded": 0}
    assert sent == []
    assert Job.objects.get(pk=live.id).status == "running"


def test_inside_a_transaction_the_signal_waits_for_the_commit(sent):
    [rolled_back] = claim()
    expire(rolled_back)
    with transaction.atomic():
        Store().rescue_expired()
        transaction.set_rollback(True)
    assert sent == []  # never happened
    assert Job.objects.get(pk=rolled_back.id).status == "running"
    with transaction.atomic():
        Store().rescue_expired()
        assert sent == []  # not yet visible to anyone else
    [(name, kwargs)] = sent
    assert name == "jobs_recovered" and [j.id for j in kwargs["jobs"]] == [rolled_back.id]


def test_a_failing_receiver_is_logged_and_the_others_still_hear(sent, caplog):
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    [job] = claim()
    expire(job)
    signals.jobs_recovered.connect(broken, dispatch_uid="test-broken")
    try:
        with caplog.at_level(logging.ERROR, logger="jobqueue"):
            recovered = Store().rescue_expired()
    finally:
        signals.jobs_recovered.disconnect(dispatch_uid="test-broken")
    assert recovered == [(job.id, ADD, "pending")]  # the caller is not told of the bug
    assert [name for name, _ in sent] == ["jobs_recovered"]
    assert "signal receiver" in caplog.text and "receiver bug" in caplog.text
