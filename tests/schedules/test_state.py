"""The schedules' database side with explicit ``now`` values: the compare-and-set, skips,
pause, downtime catch-up and changed definitions. SQLite and PostgreSQL alike."""

import datetime as dt
import logging
import threading

import pytest
from django.db import connections

from jobqueue import conf
from jobqueue.models import Job, Schedule
from jobqueue.schedules import spec as schedule_spec
from jobqueue.schedules import state

pytestmark = pytest.mark.django_db

UTC = dt.UTC
T0 = dt.datetime(2026, 1, 1, 12, 0, 5, tzinfo=UTC)  # 5 s past a tick of every 10 s
KEY = "jobqueue:schedule:ping"


def spec(**entry):
    options = {"task": "tests.testapp.tasks.add", "every": 10, "args": [1, 2], **entry}
    return schedule_spec.load(conf.build({"SCHEDULES": {"ping": options}}))[0]


def at(seconds):
    return T0 + dt.timedelta(seconds=seconds)


def row():
    return Schedule.objects.get(name="ping")


def first_tick(s, now=T0):
    return state.sync([s], now)["ping"].next_tick


def test_a_new_schedule_starts_at_the_first_tick_after_it_is_seen():
    s = spec()
    assert first_tick(s) == dt.datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC)
    # A tick before the row existed (12:00:00) never runs: evaluated now, nothing is due.
    outcome = state.tick(s, row().next_tick, T0)
    assert outcome.kind == "not_due"
    assert not Job.objects.exists()


def test_sync_leaves_an_existing_row_as_it_is():
    s = spec()
    first = first_tick(s)
    assert state.sync([s], at(3600))["ping"].next_tick == first


def test_a_won_tick_enqueues_an_ordinary_job_whose_run_at_is_the_tick():
    s = spec(queue="emails", priority=5, max_attempts=7, kwargs={})
    tick = first_tick(s)
    outcome = state.tick(s, tick, at(5.2))
    assert (outcome.kind, outcome.tick, outcome.next_tick) == ("enqueued", tick, at(15))
    job = Job.objects.get()
    assert outcome.job_id == job.pk
    assert (job.task_name, job.args, job.kwargs, job.status) == (
        "tests.testapp.tasks.add",
        [1, 2],
        {},
        "pending",
    )
    assert (job.run_at, job.idempotency_key) == (tick, KEY)
    assert (job.queue, job.priority, job.max_attempts) == ("emails", 5, 7)
    r = row()
    assert (r.next_tick, r.last_tick, r.last_job_id, r.skipped) == (at(15), tick, job.pk, 0)


def test_two_evaluations_of_the_same_read_tick_enqueue_once():
    s = spec()
    tick = first_tick(s)
    first = state.tick(s, tick, at(5.1))
    second = state.tick(s, tick, at(5.3))
    assert first.kind == "enqueued"
    assert (second.kind, second.next_tick) == ("lost", at(15))
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_for_one_tick_enqueue_once():
    s = spec()
    tick = first_tick(s)
    start = threading.Barrier(2)
    outcomes = []

    def evaluate():
        try:
            start.wait()
            outcomes.append(state.tick(s, tick, at(5.1)).kind)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=evaluate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["enqueued", "lost"]
    assert Job.objects.count() == 1


@pytest.mark.parametrize("unfinished", ["pending", "running"])
def test_a_tick_is_skipped_while_the_previous_run_is_unfinished(unfinished, caplog):
    s = spec()
    job_id = state.tick(s, first_tick(s), at(5)).job_id
    Job.objects.filter(pk=job_id).update(status=unfinished)
    with caplog.at_level(logging.INFO, logger="jobqueue.schedules"):
        outcome = state.tick(s, at(15), at(15.5))
    assert (outcome.kind, outcome.tick, outcome.unfinished_job_id) == ("skipped", at(15), job_id)
    assert outcome.next_tick == at(25)
    assert Job.objects.count() == 1
    r = row()
    assert (r.skipped, r.last_skipped_at, r.next_tick) == (1, at(15.5), at(25))
    # The tick of the last job, and the job, are still the first ones.
    assert (r.last_tick, r.last_job_id) == (at(5), job_id)
    message = next(m for m in caplog.messages if "skipped" in m)
    assert "ping" in message and at(15).isoformat() in message and f"job {job_id}" in message

    state.tick(s, at(25), at(25.1))
    assert row().skipped == 2


@pytest.mark.parametrize("finished", ["failed", "abandoned", "succeeded", "discarded"])
def test_a_finished_failed_or_abandoned_run_frees_the_schedule(finished):
    s = spec()
    first = state.tick(s, first_tick(s), at(5)).job_id
    Job.objects.filter(pk=first).update(status=finished)
    outcome = state.tick(s, at(15), at(15.5))
    assert outcome.kind == "enqueued"
    assert Job.objects.get(pk=outcome.job_id).run_at == at(15)
    assert row().skipped == 0


def test_a_paused_schedule_lets_ticks_pass_without_enqueuing():
    s = spec()
    tick = first_tick(s)
    assert state.set_paused("ping", True) is True
    outcome = state.tick(s, tick, at(5.5))
    assert (outcome.kind, outcome.next_tick) == ("paused", at(15))
    assert not Job.objects.exists()
    assert (row().next_tick, row().paused, row().skipped) == (at(15), True, 0)

    assert state.set_paused("ping", False) is True
    assert state.tick(s, at(15), at(15.5)).kind == "enqueued"


def test_set_paused_of_an_unknown_schedule_is_false():
    assert state.set_paused("nope", True) is False


def test_set_paused_creates_the_row_of_a_configured_schedule(settings):
    settings.JOBQUEUE = {
        "SCHEDULES": {"ping": {"task": "tests.testapp.tasks.add", "every": 10, "args": [1, 2]}}
    }
    assert state.set_paused("ping", True) is True
    assert row().paused is True


def test_after_downtime_exactly_one_job_runs_for_the_latest_missed_tick():
    s = spec()
    tick = first_tick(s)  # 12:00:10
    back = at(3600 + 7)  # every worker was down for an hour: 360 ticks missed
    outcome = state.tick(s, tick, back)
    assert outcome.kind == "enqueued"
    job = Job.objects.get()
    assert job.run_at == at(3605) == s.latest_at_or_before(back)
    assert (row().next_tick, row().last_tick) == (at(3615), at(3605))
    # The next evaluation is the next tick's, not another missed one.
    assert state.tick(s, row().next_tick, at(3608)).kind == "not_due"
    assert Job.objects.count() == 1


def test_downtime_catch_up_of_a_cron_schedule_runs_the_latest_missed_day_once():
    s = spec(every=None, cron="0 3 * * *", timezone="Europe/Berlin")
    tick = first_tick(s)  # 2026-01-02 03:00 Berlin
    back = dt.datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    outcome = state.tick(s, tick, back)
    assert outcome.kind == "enqueued"
    assert Job.objects.get().run_at == dt.datetime(2026, 1, 5, 2, 0, tzinfo=UTC)  # 03:00 CET
    assert row().next_tick == dt.datetime(2026, 1, 6, 2, 0, tzinfo=UTC)


def test_a_changed_definition_recomputes_the_next_tick_from_now():
    old = spec()
    read = first_tick(old)  # 12:00:10
    new = spec(every=3600)
    later = at(60)
    rows = state.sync([new], later)
    assert rows["ping"].definition == "every 3600"
    assert rows["ping"].next_tick == dt.datetime(2026, 1, 1, 13, 0, tzinfo=UTC)
    # A worker still holding the old tick loses: the row moved on under the new definition.
    outcome = state.tick(new, read, later)
    assert (outcome.kind, outcome.next_tick) == ("lost", rows["ping"].next_tick)
    assert not Job.objects.exists()


def test_a_worker_with_the_old_definition_does_not_win_the_tick():
    old, new = spec(), spec(every=3600)
    state.sync([old], T0)
    read = state.sync([new], at(60))["ping"].next_tick
    outcome = state.tick(old, read, read + dt.timedelta(seconds=1))
    assert (outcome.kind, outcome.definition) == ("lost", "every 3600")
    assert not Job.objects.exists()


def test_run_now_enqueues_once_and_respects_the_unfinished_run():
    s = spec()
    now = at(2)
    job = state.run_now(s, now)
    assert job is not None
    stored = Job.objects.get()
    assert (stored.run_at, stored.idempotency_key) == (now, KEY)
    assert row().last_job_id == job.pk
    assert state.run_now(s, now) is None
    # The ticks are untouched, and the next tick finds the run unfinished.
    assert state.tick(s, row().next_tick, at(5)).kind == "skipped"


def test_run_now_runs_a_paused_schedule():
    s = spec()
    first_tick(s)
    state.set_paused("ping", True)
    assert state.run_now(s, at(1)) is not None


def test_status_reports_each_schedule():
    s = spec()
    other = schedule_spec.load(
        conf.build(
            {
                "SCHEDULES": {
                    "nightly": {
                        "task": "tests.testapp.tasks.add",
                        "cron": "0 3 * * *",
                        "timezone": "Europe/Berlin",
                        "args": [1, 2],
                    }
                }
            }
        )
    )[0]
    job_id = state.tick(s, first_tick(s), at(5)).job_id
    state.tick(s, at(15), at(15))  # skipped
    ping, nightly = state.status([s, other], now=at(16))
    assert ping == state.ScheduleStatus(
        name="ping",
        task="tests.testapp.tasks.add",
        expression="every 10 s",
        timezone="UTC",
        next_tick=at(25),
        last_tick=at(5),
        last_job_id=job_id,
        last_job_status="pending",
        skipped=1,
        last_skipped_at=at(15),
        paused=False,
    )
    # No worker has seen "nightly" yet: its next tick is the one the first worker will set.
    assert nightly.next_tick == dt.datetime(2026, 1, 2, 2, 0, tzinfo=UTC)
    assert (nightly.last_tick, nightly.last_job_id, nightly.last_job_status) == (None, None, None)
    assert (nightly.expression, nightly.timezone) == ("0 3 * * *", "Europe/Berlin")
    assert not Schedule.objects.filter(name="nightly").exists()


def test_status_of_a_pruned_last_job_is_none():
    s = spec()
    job_id = state.tick(s, first_tick(s), at(5)).job_id
    Job.objects.filter(pk=job_id).delete()
    (status,) = state.status([s], now=at(6))
    assert (status.last_job_id, status.last_job_status) == (job_id, None)
