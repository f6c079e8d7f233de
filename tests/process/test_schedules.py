"""Schedules with real worker processes: one job per tick across two supervisors, skips while
a run blocks, and a run whose worker is SIGKILLed never stopping its schedule."""

import datetime as dt
import itertools
import time

import pytest
from django.db import connection

from jobqueue.models import Job, Schedule
from jobqueue.models import Worker as WorkerRow
from tests.conftest import BEHIND_PGBOUNCER, wait_for
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

LEASE = 3.0
SHORT = {"LEASE": LEASE, "SAFETY_BUFFER": 0.5, "POLL_INTERVAL": 0.2, "SHUTDOWN_TIMEOUT": 2}


def schedule(name, task, *, every, args=()):
    return {
        "SCHEDULES": {
            name: {"task": f"tests.testapp.tasks.{task}", "every": every, "args": list(args)}
        }
    }


def jobs_of(name):
    return Job.objects.filter(idempotency_key=f"jobqueue:schedule:{name}").order_by("run_at")


def test_two_supervisors_enqueue_each_tick_once(start_worker, postgresql_only):
    settings = {
        **SHORT,
        **schedule("ping", "noop", every=2, args=["ping"]),
        "POOLS": {"default": {"queues": "*", "concurrency": 2, "processes": 2}},
    }
    first = start_worker(supervisor=True, settings=settings)
    second = start_worker(supervisor=True, settings=settings)
    # Four worker processes, each evaluating the schedule on its own timer.
    wait_for(lambda: WorkerRow.objects.count() == 4, timeout=60, message="four workers")
    started = dt.datetime.now(dt.UTC)
    time.sleep(12)
    ended = dt.datetime.now(dt.UTC)
    first.stop()
    second.stop()

    window = [j.run_at for j in jobs_of("ping").filter(run_at__gte=started, run_at__lt=ended)]
    assert 5 <= len(window) <= 7, window
    every = [j.run_at for j in jobs_of("ping")]
    assert len(set(every)) == len(every), every  # no tick twice
    assert {b - a for a, b in itertools.pairwise(every)} == {dt.timedelta(seconds=2)}, every
    assert Schedule.objects.get(name="ping").skipped == 0
    # Each job ran once, and none is left behind.
    assert Execution.objects.filter(label="ping").count() == len(every)
    assert set(jobs_of("ping").values_list("status", flat=True)) == {"succeeded"}


def test_ticks_are_skipped_while_the_run_blocks_and_resume_once_it_finishes(start_worker, tmp_path):
    gate = tmp_path / "gate"
    worker = start_worker(
        "--concurrency",
        "2",
        settings={
            **SHORT,
            **schedule("blocker", "block_until", every=1, args=[str(gate), "sched"]),
        },
    )
    wait_for(
        lambda: Execution.objects.filter(label="sched:start").exists(),
        timeout=60,
        message="the first run to start",
    )
    wait_for(
        lambda: Schedule.objects.get(name="blocker").skipped >= 3,
        timeout=10,
        message="three skipped ticks",
    )
    (blocked,) = jobs_of("blocker")  # no second job while the first runs
    assert blocked.status == "running"
    assert "schedule blocker: skipped the tick of" in worker.output()
    assert f"its previous run, job {blocked.pk}, is unfinished" in worker.output()

    gate.touch()
    wait_for(lambda: jobs_of("blocker").count() >= 2, timeout=10, message="the next tick's job")
    first, following = jobs_of("blocker")[:2]
    assert first.status == "succeeded"
    # The tick after the finish, not one of those skipped meanwhile.
    assert following.run_at > first.finished_at - dt.timedelta(seconds=1)
    wait_for(
        lambda: Execution.objects.filter(label="sched:end").count() >= 2,
        timeout=10,
        message="the next run to finish too",
    )


def test_a_run_whose_worker_is_killed_mid_handler_does_not_stop_the_schedule(
    start_worker, tmp_path
):
    # on_crash="park": the killed run is parked (abandoned), which frees the schedule.
    gate = tmp_path / "gate"
    settings = {
        **SHORT,
        **schedule("parked", "park_block_until", every=1, args=[str(gate), "park"]),
    }
    doomed = start_worker(settings=settings)
    wait_for(
        lambda: Execution.objects.filter(label="park:start").exists(),
        timeout=60,
        message="the first run to start",
    )
    doomed.kill()  # SIGKILL, mid-handler
    (crashed,) = jobs_of("parked")
    assert crashed.status == "running"

    start_worker(settings=settings)
    # Its lease runs out, the new worker's rescue parks it, and a later tick runs.
    wait_for(
        lambda: Execution.objects.filter(label="park:start").count() >= 2,
        timeout=LEASE + 30,
        message="a later tick to run",
    )
    crashed.refresh_from_db()
    assert (crashed.status, crashed.crashes) == ("abandoned", 1)
    later = jobs_of("parked").exclude(pk=crashed.pk).get()
    assert later.run_at > crashed.run_at
    gate.touch()
    wait_for(
        lambda: Job.objects.get(pk=later.pk).status == "succeeded",
        timeout=10,
        message="the later run to finish",
    )


def test_a_retried_crash_under_a_supervisor_lets_the_schedule_go_on(start_worker):
    # on_crash="retry" (the default): the supervisor reaps its killed child and puts the run
    # back at once; the run finishes on the replacement, and the following ticks run.
    settings = {**SHORT, **schedule("crashy", "kill_self_once_started", every=1)}
    start_worker(supervisor=True, settings=settings)
    wait_for(
        lambda: jobs_of("crashy").filter(status="succeeded").count() >= 2,
        timeout=90,
        message="two runs to succeed, each after killing its worker once",
    )
    first, second = jobs_of("crashy").filter(status="succeeded")[:2]
    assert (first.crashes, second.crashes) == (1, 1)
    assert second.run_at > first.run_at


def test_runjobs_refuses_to_start_with_a_bad_schedule(start_worker):
    bad = {"SCHEDULES": {"nightly": {"task": "tests.testapp.tasks.noop", "cron": "0 25 * * *"}}}
    worker = start_worker(settings=bad)
    assert worker.wait(60) != 0
    assert 'JOBQUEUE["SCHEDULES"]["nightly"]["cron"]: \'0 25 * * *\' is not a valid cron' in (
        worker.output()
    )
    assert not WorkerRow.objects.exists()


def _last_statement_of_others():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT max(query_start) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND query NOT LIKE 'LISTEN%%'"
        )
        return cursor.fetchone()[0]


@pytest.mark.skipif(
    BEHIND_PGBOUNCER,
    reason="behind a transaction pooler the worker's statements run on server backends the "
    "test's own connection shares, so pg_stat_activity cannot tell them apart",
)
def test_an_idle_worker_sends_no_statement_between_ticks(start_worker, postgresql_only):
    start_worker(settings=schedule("quiet", "noop", every=5, args=["quiet"]))
    wait_for(
        lambda: jobs_of("quiet").filter(status="succeeded").exists(), timeout=60, message="a run"
    )
    tick = jobs_of("quiet").filter(status="succeeded").last().run_at
    next_tick = tick + dt.timedelta(seconds=5)

    def sleep_until(moment):
        time.sleep(max(0.0, (moment - dt.datetime.now(dt.UTC)).total_seconds()))

    sleep_until(tick + dt.timedelta(seconds=1.5))
    before = _last_statement_of_others()
    sleep_until(next_tick - dt.timedelta(seconds=0.5))
    assert _last_statement_of_others() == before
    # And the measure can tell: the next tick's statements show.
    sleep_until(next_tick + dt.timedelta(seconds=1))
    assert _last_statement_of_others() > before
