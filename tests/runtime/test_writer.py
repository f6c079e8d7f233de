"""The writer thread: successes handed over are written, after an outage too, and claims
wait for a statement of their own."""

import pytest
from django.db import OperationalError

from jobqueue.models import Job
from jobqueue.runtime import writer as writer_module
from jobqueue.runtime.writer import Writer
from jobqueue.store.jobs import ClaimScope, Store, success
from tests.conftest import wait_for
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.testapp.tasks.add"
SCOPE = ClaimScope("w1", (ADD,), None)


class OutageStore(Store):
    """A store whose first ``failures`` writes find the database away."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.batches: list[list[int]] = []

    def record(self, done, **kwargs):
        self.batches.append([d.job.id for d in done])
        if self.failures:
            self.failures -= 1
            raise OperationalError("the database is away")
        return super().record(done, **kwargs)


class Claims:
    """The writer's demand and intake in one: ``sizes`` says what to claim, and the jobs
    claimed are kept in ``claimed``."""

    def __init__(self, sizes):
        self.sizes = sizes
        self.claimed = []

    def take(self, jobs, asked, recorded):
        self.claimed.extend(jobs)


def start_writer(store, sizes=lambda: (0, 0)):
    claims = Claims(sizes)
    writer = Writer(store=store, demand=claims, intake=claims)
    writer.start(SCOPE)
    return writer, claims.claimed


def test_successes_from_a_failed_write_go_out_with_the_next(monkeypatch):
    # Long enough that the retry comes only with the stop, which cuts the pause short.
    monkeypatch.setattr(writer_module, "RETRY_PAUSE", 30)
    jobs = JobFactory.create_batch(2)
    store = OutageStore(failures=1)
    held = store.claim(worker="w1", task_names=[ADD], queues=None, limit=2)
    writer, _ = start_writer(store)
    writer.add(success(held[0], 1))
    wait_for(lambda: len(store.batches) >= 1, message="the failed write")
    writer.add(success(held[1], 2))
    assert writer.stop(timeout=10)
    # Nothing lost: the first success was kept and written with the second.
    assert store.batches[-1] == [held[0].id, held[1].id]
    rows = Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk")
    assert [(r.status, r.result) for r in rows] == [("succeeded", 1), ("succeeded", 2)]
    assert writer.pending == 0


def test_a_claim_waits_for_a_statement_that_starts_after_it():
    JobFactory.create_batch(3)
    sizes = iter([(2, 0), (1, 0)])
    writer, claimed = start_writer(Store(), sizes=lambda: next(sizes))
    assert writer.claim() == (2, 2)
    assert writer.claim() == (1, 1)
    assert [j.id for j in claimed] == sorted(j.id for j in claimed)
    assert Job.objects.filter(status="running", worker="w1").count() == 3
    assert writer.stop(timeout=10)


def test_a_claim_raises_the_error_of_its_statement():
    store = OutageStore(failures=1)
    writer, _ = start_writer(store, sizes=lambda: (1, 0))
    with pytest.raises(OperationalError):
        writer.claim()
    assert writer.claim() == (1, 0)  # the database is back; nothing is due
    assert writer.stop(timeout=10)


def test_the_start_of_a_held_job_wakes_the_writer_and_is_recorded():
    JobFactory.create_batch(2)
    store = Store()
    held = store.claim(worker="w1", task_names=[ADD], queues=None, limit=0, ahead=2)
    assert [j.held for j in held] == [True, True]
    writer, _ = start_writer(store)
    try:
        # No success is waiting: the start alone sends a statement, at once.
        writer.started(held[0])
        wait_for(
            lambda: Job.objects.get(pk=held[0].id).started_at is not None,
            message="the start to be recorded",
        )
        assert Job.objects.get(pk=held[0].id).status == "running"
        assert Job.objects.get(pk=held[1].id).started_at is None
    finally:
        assert writer.stop(timeout=10)


def test_a_start_from_a_failed_write_goes_out_with_the_next(monkeypatch):
    monkeypatch.setattr(writer_module, "RETRY_PAUSE", 30)
    JobFactory()
    store = OutageStore(failures=1)
    [held] = store.claim(worker="w1", task_names=[ADD], queues=None, limit=0, ahead=1)
    writer, _ = start_writer(store)
    writer.started(held)
    wait_for(lambda: len(store.batches) >= 1, message="the failed write")
    # The stop cuts the pause short, and writes what is left before the thread ends.
    assert writer.stop(timeout=10)
    assert Job.objects.get(pk=held.id).started_at is not None
