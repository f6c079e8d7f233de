"""Flow control in the claim: per-key concurrency and rate limits, counted from the job rows."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from django.db import NotSupportedError, transaction
from django.utils import timezone

from jobqueue import RateLimit
from jobqueue.models import Job, LimitKey
from jobqueue.sql import Queries
from jobqueue.store.jobs import Store, success
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def flow_control(request):
    """The claim enforces limits on PostgreSQL; elsewhere the enqueue refuses them."""
    if "refused" not in request.node.name and not Queries("default").flow_control:
        pytest.skip("flow control is PostgreSQL's in this version; the enqueue refuses it here")


def test_where_the_claim_cannot_enforce_limits_the_enqueue_is_refused():
    if Queries("default").flow_control:
        pytest.skip("this database's claim enforces limits")
    with transaction.atomic():
        tasks.add.enqueue(1, 2)
        with pytest.raises(NotSupportedError, match=r"per_tenant: Concurrency and RateLimit need"):
            tasks.per_tenant.enqueue("acme")
        with pytest.raises(NotSupportedError, match=r"add: Concurrency and RateLimit need"):
            tasks.add.using(rate_limit=RateLimit(limit=1)).enqueue(1, 2)
        # The caller's transaction goes on, with nothing of the refused jobs in it.
        assert list(Job.objects.values_list("task_name", flat=True)) == [ADD]
    assert Job.objects.count() == 1


TENANT = "tests.testapp.tasks.per_tenant"
ACCOUNT = "tests.testapp.tasks.per_account"
ADD = "tests.testapp.tasks.add"
STRIPE = ["tests.testapp.tasks.refund", "tests.testapp.tasks.charge"]


def claim(limit=10, task_names=(TENANT,), worker="w1", ahead=0):
    return Store().claim(
        worker=worker,
        task_names=list(task_names),
        queues=None,
        excluded=(),
        limit=limit,
        ahead=ahead,
    )


def claim_settled(**kwargs):
    """A claim after the first look at new keys has made their rows."""
    found = claim(**kwargs)
    return found or claim(**kwargs)


def test_the_key_and_the_limit_are_stored_at_enqueue():
    job = tasks.per_tenant.enqueue("acme", n=1)
    row = Job.objects.get(pk=job.pk)
    assert (row.concurrency_key, row.concurrency_limit) == (f"{TENANT}:acme", 2)
    assert row.rate_key is None and job.concurrency_key == row.concurrency_key
    assert Job.objects.get(pk=tasks.per_tenant.enqueue(tenant=7).pk).concurrency_key == (
        f"{TENANT}:7"
    )
    rated = Job.objects.get(pk=tasks.per_account.enqueue(3).pk)
    assert (rated.rate_key, rated.rate_limit, rated.rate_per, rated.rate_burst) == (
        f"{ACCOUNT}:3",
        5,
        1.0,
        0,
    )


def test_at_most_limit_running_per_key_and_other_keys_claimed_past_them():
    for n in range(5):
        tasks.per_tenant.enqueue("a", n)
    for n in range(3):
        tasks.per_tenant.enqueue("b", n)
    claimed = claim_settled()
    by_tenant = sorted(job.args[0] for job in claimed)
    assert by_tenant == ["a", "a", "b", "b"]
    # Full keys: nothing more, however often a worker looks.
    assert claim() == [] and claim() == []
    running = Job.objects.filter(status="running")
    assert running.filter(concurrency_key=f"{TENANT}:a").count() == 2


def test_a_success_frees_its_slot_in_the_same_statement():
    for n in range(3):
        tasks.per_tenant.enqueue("a", n)
    first, _ = claim_settled()
    store = Store()
    [next_one] = store.record([success(first, 1)], scope=_scope(), limit=10)
    assert next_one.args == ["a", 2] and Job.objects.get(pk=first.id).status == "succeeded"
    assert Job.objects.filter(status="running").count() == 2


def test_a_stale_success_frees_nothing():
    for n in range(3):
        tasks.per_tenant.enqueue("a", n)
    first, _ = claim_settled()
    stale = dataclasses.replace(first, token="0" * 32)
    assert Store().record([success(stale, 1)], scope=_scope(), limit=10) == []
    assert Job.objects.get(pk=first.id).status == "running"


def test_a_retry_or_a_recovery_frees_the_slot():
    for n in range(3):
        tasks.per_tenant.enqueue("a", n)
    first, second = claim_settled()
    store = Store()
    store.snooze(first, 0, worker="w1")
    # The snoozed job's slot is free again: the next of the key (run_at ahead of the
    # snoozed one's new one) takes it.
    assert [job.args[1] for job in claim()] == [2]
    Job.objects.filter(pk=second.id).update(lease_until=timezone.now() - dt.timedelta(seconds=1))
    store.rescue_expired()
    assert Job.objects.get(pk=second.id).status == "pending"
    assert [job.id for job in claim()] in ([first.id], [second.id])
    assert claim() == []


def test_a_group_is_one_limit_over_its_tasks():
    tasks.refund.enqueue(3, "ch_1")
    tasks.charge.enqueue(3, 100)
    tasks.charge.enqueue(4, 100)
    claimed = claim_settled(task_names=STRIPE)
    assert sorted(job.args[0] for job in claimed) == [3, 4]
    assert {row.concurrency_key for row in Job.objects.filter(status="running")} == {
        "stripe:3",
        "stripe:4",
    }


def test_rate_limit_spaces_starts_and_says_when_the_next_is_allowed():
    for n in range(4):
        tasks.per_account.enqueue(1, n)
    tasks.per_account.enqueue(2, 0)
    first = claim_settled(task_names=[ACCOUNT])
    assert sorted(job.args[0] for job in first) == [1, 2]
    result = Store().record([], scope=_scope([ACCOUNT]), limit=10)
    assert result == []
    # The next start of account 1 is allowed 0.2 s after the first.
    assert result.next_due is not None and 0 < result.next_due <= 0.2
    key = LimitKey.objects.get(key=f"{ACCOUNT}:1")
    assert key.tat is not None and key.version >= 1


def test_unlimited_jobs_are_not_held_back():
    for n in range(5):
        tasks.add.enqueue(n, n)
    assert len(claim(task_names=[ADD])) == 5
    assert not LimitKey.objects.exists()


def _scope(task_names=(TENANT,)):
    from jobqueue.store.jobs import ClaimScope

    return ClaimScope(worker="w1", task_names=tuple(task_names), queues=None)


def test_a_claim_that_took_some_says_when_a_rate_limit_allows_the_next_start(postgresql_only):
    # A worker whose handlers run long still starts rate-limited jobs at their rate: the
    # claim that took one tells it when the next may start, though it found work.
    for n in range(3):
        tasks.per_account.enqueue(1, n)
    claim(task_names=[ACCOUNT])  # makes the key's row
    taken = Store().record([], scope=_scope([ACCOUNT]), limit=10)
    assert len(taken) == 1
    assert taken.next_due is not None and 0 < taken.next_due <= 0.2
