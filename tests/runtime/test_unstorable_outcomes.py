"""Outcomes that cannot be written as they are fail their job, saying so; they never leave it
running, and never block the statement that records the other jobs' successes."""

import datetime as dt

import pytest
from django.utils import timezone

from jobqueue import conf
from jobqueue.models import Job
from jobqueue.runtime.writer import Writer
from jobqueue.store.jobs import ClaimScope, Store, Success, success
from tests.factories import JobFactory
from tests.runtime.test_writer import Claims

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.testapp.tasks.add"
SCOPE = ClaimScope("w1", (ADD,), None)
UNSTORABLE = "jobqueue.store.UnstorableOutcome"

# JSON texts of results that the slot's check would have caught, handed to the writer as
# they are: a raw lone surrogate no driver can encode, and a NUL escape that PostgreSQL's
# jsonb refuses (SQLite stores it, so there it is an ordinary success).
RAW_SURROGATE = '"\ud800"'
NUL_ESCAPE = '"a\\u0000b"'


def claim(count):
    JobFactory.create_batch(count)
    return Store().claim(worker="w1", task_names=[ADD], queues=None, limit=count)


@pytest.mark.parametrize("bad_result", [RAW_SURROGATE, NUL_ESCAPE], ids=["surrogate", "nul"])
def test_a_refused_success_is_failed_and_the_rest_of_its_batch_recorded(vendor, bad_result):
    if bad_result == NUL_ESCAPE and vendor != "postgresql":
        pytest.skip("SQLite stores a NUL escape in JSON")
    good_1, bad, good_2 = claim(3)
    due = JobFactory.create_batch(2)  # for the statement's claim
    sizes = iter([(2, 0)])
    claims = Claims(lambda: next(sizes, (0, 0)))
    claimed = claims.claimed
    writer = Writer(store=Store(), demand=claims, intake=claims)
    # Handed over before the thread starts: all three go out in its first statement.
    writer.add(success(good_1, 1))
    writer.add(Success(bad, bad_result))
    writer.add(success(good_2, 2))
    writer.start(SCOPE)
    assert writer.stop(timeout=10)

    rows = {row.pk: row for row in Job.objects.all()}
    assert (rows[good_1.id].status, rows[good_1.id].result) == ("succeeded", 1)
    assert (rows[good_2.id].status, rows[good_2.id].result) == ("succeeded", 2)
    refused = rows[bad.id]
    assert refused.status == "failed" and refused.errors[0]["type"] == UNSTORABLE
    assert refused.errors[0]["message"].startswith("the result of attempt 1 could not be stored")
    assert refused.last_error.startswith(UNSTORABLE)
    # The statement's claim was made once, after the split: each due job claimed once.
    assert sorted(job.id for job in claimed) == sorted(job.pk for job in due)
    assert {(rows[job.pk].status, rows[job.pk].attempts) for job in due} == {("running", 1)}


def entry(message="it broke", **extra):
    return {"type": "ValueError", "message": message, "traceback": "", "attempt": 1, **extra}


@pytest.mark.parametrize("method", ["retry", "fail"])
def test_an_error_entry_json_refuses_fails_the_job_with_one_that_says_so(method):
    [job] = claim(1)
    store = Store()
    bad = entry(detail=10**5000)  # json.dumps raises ValueError
    if method == "retry":
        store.retry(job, bad, 1, worker="w1")
    else:
        store.fail(job, bad, worker="w1")
    row = Job.objects.get(pk=job.id)
    assert (row.status, row.errors[0]["type"]) == ("failed", UNSTORABLE)
    assert "the error entry of attempt 1 could not be stored (ValueError:" in row.last_error


def test_an_error_entry_the_database_refuses_fails_the_job(postgresql_only):
    [job] = claim(1)
    # Not made by error_entry, which escapes NUL bytes: PostgreSQL refuses \u0000 in jsonb.
    Store().retry(job, entry("a \x00 byte"), 1, worker="w1")
    row = Job.objects.get(pk=job.id)
    assert (row.status, row.errors[0]["type"]) == ("failed", UNSTORABLE)
    assert "DataError" in row.errors[0]["message"]


@pytest.mark.parametrize(
    "seconds", [1e12, float("inf"), float("nan"), 10**400], ids=["1e12", "inf", "nan", "10**400"]
)
def test_a_delay_past_the_maximum_is_clamped(seconds):
    first, second = claim(2)
    store = Store()
    store.snooze(first, seconds, worker="w1")
    store.retry(second, entry(), seconds, worker="w1")
    ten_years = timezone.now() + dt.timedelta(seconds=conf.MAX_DELAY)
    for job in (first, second):
        row = Job.objects.get(pk=job.id)
        assert row.status == "pending"
        assert abs(row.run_at - ten_years) < dt.timedelta(minutes=5)


def test_a_result_json_refuses_fails_the_job_when_written_from_the_slot():
    [job] = claim(1)
    Store().succeed(job, 10**5000, worker="w1")
    row = Job.objects.get(pk=job.id)
    assert (row.status, row.errors[0]["type"]) == ("failed", UNSTORABLE)
    assert "the result of attempt 1 could not be stored (ValueError:" in row.last_error


def test_a_result_json_dumps_refuses_after_the_checks_fails_the_job(monkeypatch):
    from jobqueue.runtime import attempt as attempt_module
    from jobqueue.runtime.worker import Worker
    from tests.testapp import tasks

    # As if the checks had missed it: json.dumps raises ValueError as the success is handed
    # to the writer. The job fails at once, saying so, instead of staying running.
    monkeypatch.setattr(attempt_module, "json_problem", lambda value, path: None)
    job = tasks.returns_huge_int.enqueue()
    Worker(burst=True).run()
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.errors[0]["type"]) == ("failed", 1, UNSTORABLE)
    assert "the result of attempt 1 could not be stored (ValueError:" in row.last_error
