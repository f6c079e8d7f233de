"""One worker, in this process: outcomes, retries with backoff, fencing, timeouts, steps."""

import datetime as dt
import logging
import threading
import time

import pytest
from django.db import connection
from django.utils import timezone

from bench.counting import StatementCounter
from jobqueue import signals
from jobqueue.models import Job
from jobqueue.runtime.worker import EXIT_OK, EXIT_STUCK, Worker
from jobqueue.sql import load
from tests.conftest import wait_for
from tests.factories import JobFactory
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def run_burst(**kwargs) -> int:
    """Run a worker until nothing is due and nothing is running."""
    return Worker(burst=True, **kwargs).run()


def make_due(job):
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now())


def test_success_stores_the_result():
    job = tasks.add.enqueue(2, 3)
    assert run_burst() == EXIT_OK
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.result, row.attempts, row.errors) == ("succeeded", 5, 1, [])
    assert row.finished_at >= row.started_at >= row.enqueued_at


def test_failing_task_retries_with_backoff_then_fails_with_every_error():
    job = tasks.always_fails.enqueue()
    delays = []
    for attempt in (1, 2, 3):
        run_burst()
        row = Job.objects.get(pk=job.pk)
        assert row.attempts == attempt and len(row.errors) == attempt
        if attempt < 3:
            assert row.status == "pending"
            # run_at and updated_at are written by the same statement from the same clock.
            delays.append((row.run_at - row.updated_at).total_seconds())
            make_due(job)
    assert delays == [1.0, 5.0]  # first 1 s, factor 5
    row = Job.objects.get(pk=job.pk)
    assert row.status == "failed" and row.finished_at is not None
    assert [e["attempt"] for e in row.errors] == [1, 2, 3]
    assert all(e["type"] == "ValueError" for e in row.errors)
    assert [e["message"] for e in row.errors] == [f"broken on attempt {n}" for n in (1, 2, 3)]
    assert 'raise ValueError(f"broken on attempt {ctx.attempt}")' in row.errors[0]["traceback"]
    assert all(e["worker"] and e["at"] for e in row.errors)
    assert row.last_error == "ValueError: broken on attempt 3"
    assert Execution.objects.filter(label="always_fails").count() == 3


def test_backoff_is_capped():
    from jobqueue.tasks import base as registry

    t = registry.task(lambda: None, name="capped", backoff=(2, 10, 60))
    assert [t.backoff_delay(n) for n in (1, 2, 3, 4)] == [2, 20, 60, 60]
    t = registry.task(lambda: None, name="custom", backoff=lambda attempt: attempt * 7)
    assert t.backoff_delay(3) == 21


def test_permanent_error_fails_at_once():
    job = tasks.permanent.enqueue()
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, len(row.errors)) == ("failed", 1, 1)
    assert row.last_error == "jobqueue.exceptions.PermanentError: the card was declined"


def test_discard_ends_the_job_discarded_at_once_with_its_reason():
    finished = []

    def receiver(**kwargs):
        finished.append((kwargs["job_id"], kwargs["status"]))

    signals.job_finished.connect(receiver)
    try:
        job = tasks.discards.enqueue()
        run_burst()
    finally:
        signals.job_finished.disconnect(receiver)
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, len(row.errors)) == ("discarded", 1, 1)
    assert row.last_error == "jobqueue.exceptions.Discard: the order was deleted"
    assert row.finished_at is not None and row.lease_until is None
    assert finished == [(job.pk, "discarded")]
    assert Execution.objects.filter(label="discards").count() == 1


def test_discard_needs_a_reason():
    from jobqueue import Discard

    with pytest.raises(TypeError, match="non-empty string"):
        Discard("")


def test_snooze_does_not_count_the_attempt():
    job = tasks.snoozes_once.enqueue()
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.errors) == ("pending", 0, [])
    assert (row.run_at - row.updated_at).total_seconds() == 30
    make_due(job)
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.result) == ("succeeded", 1, "woke")


def test_a_job_no_worker_registered_stays_pending_untouched():
    job = JobFactory(task_name="app.tasks.deployed_tomorrow")
    tasks.add.enqueue(1, 1)
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.worker, row.token) == ("pending", 0, None, None)


def test_replaced_token_discards_the_outcome(caplog):
    job = tasks.replace_token.enqueue()
    with caplog.at_level(logging.WARNING, logger="jobqueue"):
        run_burst()
    row = Job.objects.get(pk=job.pk)
    assert row.result is None and row.status == "running" and row.token == "f" * 32
    assert f"outcome discarded: job {job.pk}" in caplog.text


def test_a_result_that_is_not_json_fails_the_attempt():
    job = tasks.returns_object.enqueue()
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert row.status == "pending" and row.errors[0]["type"] == "TypeError"
    assert "not JSON" in row.errors[0]["message"]


def test_async_handler():
    job = tasks.async_add.enqueue(20, 22)
    run_burst()
    assert Job.objects.get(pk=job.pk).result == 42


def test_timeout_fails_the_attempt_and_frees_the_slot():
    stuck = tasks.sleeps_past_timeout.enqueue(seconds=4)
    quick = [tasks.add.enqueue(i, i) for i in range(3)]
    assert run_burst(concurrency=1) == EXIT_OK
    row = Job.objects.get(pk=stuck.pk)
    assert row.status == "pending" and row.attempts == 1
    assert row.errors[0]["type"] == "jobqueue.runtime.attempt.AttemptTimeout"
    assert "timed out after 1 s" in row.errors[0]["message"]
    assert "time.sleep(seconds)" in row.errors[0]["traceback"]  # where it was stuck
    # The one slot served the other jobs while the stuck handler was still sleeping.
    assert all(Job.objects.get(pk=j.pk).status == "succeeded" for j in quick)
    assert not Execution.objects.filter(label="sleeps_past_timeout:end").exists()
    # When it finally returns, its outcome is refused by the fence and nothing changes.
    wait_for(
        lambda: Execution.objects.filter(label="sleeps_past_timeout:end").exists(),
        timeout=10,
        message="the stuck handler to return",
    )
    assert Job.objects.get(pk=stuck.pk).status == "pending"


def test_stuck_handlers_piling_up_stop_the_worker():
    for _ in range(2):
        tasks.sleeps_past_timeout.enqueue(seconds=4)
    # Two handlers stuck past their timeout, one slot: more stuck threads than slots.
    assert run_burst(concurrency=1) == EXIT_STUCK
    wait_for(
        lambda: Execution.objects.filter(label="sleeps_past_timeout:end").count() == 2,
        timeout=10,
        message="the stuck handlers to return",
    )


def test_async_handler_is_cancelled_at_its_timeout():
    job = tasks.async_sleeps_past_timeout.enqueue(seconds=30)
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert row.status == "pending" and "timed out after 1 s" in row.last_error
    assert Execution.objects.filter(label="async:cancelled").count() == 1


# The statement of a look for work: MySQL's claim is a pair, whose locking read runs on every
# look and whose write only when it found jobs.
LOOK = {"postgresql": "claim", "sqlite": "claim", "mysql": "claim_lock"}


def test_a_success_goes_out_with_the_claim_of_the_slots_next_job():
    jobs = [tasks.add.enqueue(i, i) for i in range(5)]
    names = {sql: name for name, sql in load(connection.vendor).items()}
    with StatementCounter(lambda sql: names.get(sql, "other")) as counter:
        assert run_burst(concurrency=1, prefetch=0) == EXIT_OK
    assert [Job.objects.get(pk=j.pk).status for j in jobs] == ["succeeded"] * 5
    # The loop's first claim, one per success (each bringing the next job, the last one
    # none), and the loop's last, empty look: the slot never went back to the loop between.
    assert counter.counts[LOOK[connection.vendor]] == 7
    # PostgreSQL records the success inside the claim statement; SQLite, in the same
    # transaction just before it.
    expected = 0 if connection.vendor == "postgresql" else 5
    assert counter.counts["succeed_many"] == expected


def test_the_first_look_goes_out_before_the_chores():
    names = {sql: name for name, sql in load(connection.vendor).items()}
    seen: list[str] = []

    def classify(sql):
        seen.append(names.get(sql, "other"))
        return seen[-1]

    with StatementCounter(classify):
        assert run_burst() == EXIT_OK
    # Registered, then the claim; recovery, pruning and the warning come after it, and a
    # burst worker looks once more after them before it leaves.
    # (The recovery pass starts with rescue_check, and recovers only if it found a lease
    # expired.)
    look = LOOK[connection.vendor]
    named = [name for name in seen if name in {"register_worker", look, "rescue_check", "prune"}]
    assert named[:3] == ["register_worker", look, "rescue_check"], seen
    assert "recover" not in seen and "recover_lock" not in seen, seen
    assert named.count(look) == 2 and named[-1] == look, seen


def test_a_burst_worker_started_after_a_crash_runs_what_recovery_returns():
    # A dead worker's job, its lease run out: the burst worker's first look finds nothing
    # due, the recovery after it returns the job, and the worker runs it before it leaves.
    job = tasks.add.enqueue(2, 3)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        status="running",
        token="t" * 32,
        worker="gone:1:dead",
        attempts=1,
        started_at=now - dt.timedelta(minutes=10),
        lease_until=now - dt.timedelta(minutes=1),
    )
    assert run_burst() == EXIT_OK
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.result, row.attempts, row.crashes) == ("succeeded", 5, 1, 1)


def test_a_success_claims_nothing_once_the_worker_is_stopping():
    jobs = [tasks.add.enqueue(i, i) for i in range(3)]
    worker = Worker(concurrency=1)
    original = worker.runner.record_success

    def stop_after_the_first_job(attempt, value):
        worker.stop()
        original(attempt, value)

    worker.runner.record_success = stop_after_the_first_job
    assert worker.run() == EXIT_OK
    statuses = sorted(Job.objects.get(pk=j.pk).status for j in jobs)
    assert statuses == ["pending", "pending", "succeeded"]


def start_worker(**kwargs) -> tuple[Worker, threading.Thread]:
    worker = Worker(**kwargs)
    thread = threading.Thread(target=worker.run)
    thread.start()
    return worker, thread


def held_rows(worker: Worker) -> list[tuple[int, str, int, int]]:
    """(id, status, attempts, crashes) of the rows this worker holds as running."""
    return list(
        Job.objects.filter(worker=worker.id, status="running")
        .order_by("id")
        .values_list("id", "status", "attempts", "crashes")
    )


def test_short_jobs_are_claimed_ahead_and_held_until_a_slot_frees(tmp_path):
    gate = tmp_path / "gate"
    tasks.add.enqueue(1, 1)  # quick: it makes the worker's jobs "short"
    blocker = tasks.block_until.enqueue(str(gate))
    later = [tasks.add.enqueue(i, i) for i in range(3)]
    worker, thread = start_worker(concurrency=1, prefetch=2, burst=True)
    try:
        wait_for(lambda: Execution.objects.filter(label="block:start").exists(), message="start")
        # The quick job's success claimed the blocker for the slot and two more, held.
        wait_for(lambda: len(held_rows(worker)) == 3, message="two jobs held")
        assert [row[0] for row in held_rows(worker)] == [blocker.pk, later[0].pk, later[1].pk]
        assert Job.objects.get(pk=later[2].pk).status == "pending"
        assert worker.executor.load() == (1, 2)
    finally:
        gate.touch()
        thread.join(20)
    assert not thread.is_alive()
    assert Job.objects.filter(status="succeeded").count() == 5


def test_jobs_that_park_on_a_crash_are_never_held(tmp_path):
    gate = tmp_path / "gate"
    tasks.add.enqueue(1, 1)
    tasks.block_until.enqueue(str(gate))
    held = tasks.add.enqueue(2, 2)
    parked = tasks.park_block_until.enqueue(str(tmp_path / "open"))
    after = tasks.add.enqueue(3, 3)
    worker, thread = start_worker(concurrency=1, prefetch=3, burst=True)
    try:
        wait_for(lambda: Execution.objects.filter(label="block:start").exists(), message="start")
        wait_for(lambda: len(held_rows(worker)) == 2, message="one job held")
        # Held up to the first job a crash would park: it, and what comes after, wait.
        assert Job.objects.get(pk=held.pk).status == "running"
        assert Job.objects.get(pk=parked.pk).status == "pending"
        assert Job.objects.get(pk=after.pk).status == "pending"
    finally:
        (tmp_path / "open").touch()
        gate.touch()
        thread.join(20)
    assert Job.objects.filter(status="succeeded").count() == 5


def test_a_job_held_too_long_is_handed_back_unspent(tmp_path, monkeypatch):
    monkeypatch.setattr("jobqueue.runtime.demand.HOLD_LIMIT", 0.2)
    gate = tmp_path / "gate"
    tasks.add.enqueue(1, 1)
    tasks.block_until.enqueue(str(gate))
    held = tasks.add.enqueue(2, 2)
    handed_back = []
    signals.jobs_handed_back.connect(
        lambda sender, **kwargs: handed_back.append(kwargs), weak=False, dispatch_uid="t-held"
    )
    worker, thread = start_worker(concurrency=1, prefetch=1)
    try:
        wait_for(lambda: Execution.objects.filter(label="block:start").exists(), message="start")
        # Every slot is taken by a long job: the held one goes back for another worker.
        wait_for(lambda: Job.objects.get(pk=held.pk).status == "pending", message="handed back")
        row = Job.objects.get(pk=held.pk)
        assert (row.attempts, row.crashes, row.worker, row.token) == (0, 0, None, None)
        assert worker.executor.load() == (1, 0)
        wait_for(lambda: handed_back, message="jobs_handed_back")
        assert handed_back == [
            {
                "signal": signals.jobs_handed_back,
                "job_ids": [held.pk],
                "worker": worker.id,
                "reason": "held for over 0.2 s",
                "using": "default",
            }
        ]
    finally:
        signals.jobs_handed_back.disconnect(dispatch_uid="t-held")
        gate.touch()
        worker.stop()
        thread.join(20)


def test_a_held_job_has_its_start_recorded_once_a_slot_takes_it(tmp_path, caplog):
    gate = tmp_path / "gate"
    tasks.add.enqueue(1, 1)  # quick: it makes the worker's jobs "short"
    tasks.add.enqueue(2, 2)
    blocker = tasks.block_until.enqueue(str(gate))
    _, thread = start_worker(concurrency=1, prefetch=2, burst=True)
    try:
        with caplog.at_level(logging.DEBUG, logger="jobqueue"):
            wait_for(
                lambda: Execution.objects.filter(label="block:start").exists(), message="start"
            )
            # Claimed ahead, behind the second quick job, and then taken by the slot: the
            # writer records its start, with no success to send along.
            wait_for(
                lambda: Job.objects.get(pk=blocker.pk).started_at is not None,
                message="the held job's start to be recorded",
            )
        assert f"claimed job {blocker.pk} ({tasks.block_until.name}), attempt 1, held" in (
            caplog.text
        )
        assert Job.objects.get(pk=blocker.pk).status == "running"
    finally:
        gate.touch()
        thread.join(20)
    assert Job.objects.filter(status="succeeded").count() == 3


def test_stop_hands_back_held_jobs_unspent_and_runs_none_of_them(tmp_path):
    gate = tmp_path / "gate"
    tasks.add.enqueue(1, 1)
    tasks.block_until.enqueue(str(gate))
    held = [tasks.add.enqueue(i, i) for i in range(2)]
    worker, thread = start_worker(concurrency=1, prefetch=2)
    wait_for(lambda: Execution.objects.filter(label="block:start").exists(), message="start")
    wait_for(lambda: len(held_rows(worker)) == 3, message="held")
    worker.stop()
    gate.touch()
    thread.join(20)
    rows = Job.objects.filter(pk__in=[j.pk for j in held]).values_list(
        "status", "attempts", "crashes"
    )
    assert sorted(rows) == [("pending", 0, 0)] * 2
    assert Job.objects.filter(status="succeeded").count() == 2  # the quick one, the blocker


def test_the_worker_stops_if_its_writer_thread_dies(caplog):
    job = tasks.add.enqueue(1, 1)
    worker = Worker(concurrency=1)
    sizes = worker.demand.sizes

    def broken_on_the_writer_thread():
        if threading.current_thread().name == "jobqueue-writer":
            raise RuntimeError("broken")
        return sizes()

    worker.demand.sizes = broken_on_the_writer_thread
    with caplog.at_level(logging.CRITICAL, logger="jobqueue"):
        assert worker.run() == 1
    assert "the writer thread died" in caplog.text
    # It ran, but its success was never written: its lease runs out and recovery returns it.
    assert Job.objects.get(pk=job.pk).status == "running"


def test_max_jobs_counts_the_jobs_claimed_ahead():
    for i in range(10):
        tasks.add.enqueue(i, i)
    assert run_burst(concurrency=1, prefetch=4, max_jobs=3) == EXIT_OK
    assert Job.objects.filter(status="succeeded").count() == 3
    assert Job.objects.exclude(status__in=["succeeded", "pending"]).count() == 0


@pytest.mark.parametrize(
    ("typical_run", "ahead"),
    [
        (0.0001, 64),  # no-op jobs: the prefetch is the limit
        (0.01, 20),  # 4 slots start 20 such jobs in PREFETCH_WINDOW (50 ms)
        (0.019, 10),
        (0.02, 0),  # not short: nothing is claimed ahead
        (None, 0),  # nothing has run yet
    ],
)
def test_jobs_claimed_ahead_are_as_many_as_the_slots_start_within_the_window(typical_run, ahead):
    worker = Worker(concurrency=4, prefetch=64)
    worker.demand.start()
    worker.executor.typical_run = typical_run
    worker.executor.completed = 1
    assert worker.demand.sizes() == (4, ahead)


def test_max_jobs_stops_the_worker():
    for i in range(5):
        tasks.add.enqueue(i, i)
    Worker(concurrency=1, max_jobs=2).run()
    assert Job.objects.filter(status="succeeded").count() == 2


def test_steps_are_reused_by_a_later_attempt(tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    job = tasks.two_steps.enqueue(str(gate))
    # An earlier attempt finished "first" and then died: its step result is on the row.
    Job.objects.filter(pk=job.pk).update(steps={"first": 1})
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert row.result == 3 and row.steps == {"first": 1, "second": 2}
    assert list(Execution.objects.values_list("label", flat=True)) == ["second"]


def test_stop_hands_back_unfinished_jobs_at_once(tmp_path):
    gate = tmp_path / "gate"
    job = tasks.block_until.enqueue(str(gate))
    worker = Worker(shutdown_timeout=0.3)
    thread = threading.Thread(target=worker.run)
    thread.start()
    wait_for(lambda: Execution.objects.filter(label="block:start").exists(), message="start")
    worker.stop()
    thread.join(10)
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.crashes) == ("pending", 0, 1)
    assert "shut down before the job finished" in row.last_error
    # The abandoned handler thread finishes later; its outcome is refused by the fence.
    gate.touch()
    wait_for(lambda: Execution.objects.filter(label="block:end").exists(), message="end")
    assert Job.objects.get(pk=job.pk).status == "pending"


def test_worker_row_lives_while_running(tmp_path):
    from jobqueue.models import Worker as WorkerRow

    gate = tmp_path / "gate"
    tasks.block_until.enqueue(str(gate))
    worker = Worker(pool="default")
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_for(lambda: Execution.objects.filter(label="block:start").exists(), message="start")
        row = WorkerRow.objects.get()
        assert (row.id, row.pool, row.concurrency) == (worker.id, "default", 4)
        assert Job.objects.get().worker == worker.id
    finally:
        gate.touch()
        worker.stop()
        thread.join(10)
    assert not WorkerRow.objects.exists()
    assert Job.objects.get().status == "succeeded"


def test_future_jobs_are_left_for_later():
    job = tasks.add.using(run_at=timezone.now() + dt.timedelta(minutes=5)).enqueue(1, 1)
    run_burst()
    assert Job.objects.get(pk=job.pk).status == "pending"


def test_max_jobs_claims_no_more_than_it_may_run():
    jobs = [tasks.add.enqueue(i, i) for i in range(5)]
    assert Worker(concurrency=4, max_jobs=1).run() == EXIT_OK
    statuses = [Job.objects.get(pk=j.pk) for j in jobs]
    assert [(r.status, r.attempts, r.crashes) for r in statuses].count(("succeeded", 1, 0)) == 1
    assert [(r.status, r.attempts, r.crashes) for r in statuses].count(("pending", 0, 0)) == 4


def test_a_broken_backoff_falls_back_to_the_default():
    job = tasks.broken_backoff.enqueue()
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.errors[0]["type"]) == ("pending", 1, "ValueError")
    assert (row.run_at - row.updated_at).total_seconds() == 1.0  # the default's first delay


def test_keyboard_interrupt_in_a_handler_fails_the_attempt():
    job = tasks.raises_keyboard_interrupt.enqueue()
    assert run_burst() == EXIT_OK
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.errors[0]["type"]) == ("pending", "KeyboardInterrupt")


def test_async_handler_steps_and_row():
    job = tasks.async_steps.enqueue()
    run_burst()
    row = Job.objects.get(pk=job.pk)
    assert row.result == {"steps": [20, 40], "task": tasks.async_steps.name}
    assert row.steps == {"fetch": 20, "double": 40}


def test_a_retry_wakes_its_own_worker_without_waiting_for_a_poll(settings):
    settings.JOBQUEUE = {"POLL_INTERVAL": 20}
    soon = tasks.fails_once.enqueue()  # its retry is due 0.3 s after the failure
    later = tasks.fails_once_later.enqueue()  # and this one's 1.5 s after
    worker = Worker()
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        # A poll would come after 20 s or more.
        wait_for(
            lambda: Job.objects.filter(status="succeeded").count() == 2,
            timeout=5,
            message="both retries to run",
        )
    finally:
        worker.stop()
        thread.join(10)
    assert [Job.objects.get(pk=j.pk).attempts for j in (soon, later)] == [2, 2]


def test_time_limit_retires_the_worker_between_jobs(caplog):
    tasks.slow.enqueue(0.6)
    with caplog.at_level(logging.INFO, logger="jobqueue"):
        assert Worker(time_limit=0.3).run() == EXIT_OK
    assert Job.objects.get().status == "succeeded"  # the in-flight job was finished
    assert "(time_limit); exiting to be restarted" in caplog.text


def test_max_memory_retires_the_worker_after_a_job(caplog):
    jobs = [tasks.add.enqueue(i, i) for i in range(3)]
    with caplog.at_level(logging.INFO, logger="jobqueue"):
        assert Worker(concurrency=1, max_memory=1024).run() == EXIT_OK
    assert [Job.objects.get(pk=j.pk).status for j in jobs].count("succeeded") == 1
    assert "over max_memory" in caplog.text


def test_idle_timeout_exits_when_nothing_is_due(caplog):
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="jobqueue"):
        assert Worker(idle_timeout=0.5).run() == EXIT_OK
    assert time.monotonic() - started < 5
    assert "(idle_timeout); exiting" in caplog.text
