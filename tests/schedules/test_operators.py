"""``manage.py jobs schedules``: the table and ``--json``, over real schedule rows."""

import datetime as dt
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobqueue import conf
from jobqueue.models import Job, Schedule
from jobqueue.schedules import spec, state
from tests.factories import FinishedJobFactory

pytestmark = pytest.mark.django_db

SCHEDULES = {
    "nightly-feed": {
        "task": "tests.testapp.tasks.add",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "args": [1, 2],
    },
    "ping": {"task": "tests.echo", "every": 60, "args": ["ping"]},
}


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("jobs", "schedules", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def specs():
    return {s.name: s for s in spec.load(conf.get())}


@pytest.fixture
def schedules(settings):
    settings.JOBQUEUE = {"SCHEDULES": SCHEDULES}
    return specs()


def test_json_names_every_schedule_with_its_next_tick(schedules):
    before = timezone.now()
    rows = {row["name"]: row for row in json.loads(run("--json")[0])}
    assert set(rows) == {"nightly-feed", "ping"}
    nightly = dt.datetime.fromisoformat(rows["nightly-feed"]["next_tick"])
    # The next 03:00 in Berlin, shown in Berlin's time.
    assert nightly > before and nightly.tzinfo is not None
    assert (nightly.hour, nightly.minute, nightly.utcoffset()) in {
        (3, 0, dt.timedelta(hours=1)),
        (3, 0, dt.timedelta(hours=2)),
    }
    ping = dt.datetime.fromisoformat(rows["ping"]["next_tick"])
    assert before < ping <= before + dt.timedelta(seconds=60)
    assert ping.timestamp() % 60 == 0  # every 60: multiples of 60 s since the epoch
    assert rows["ping"] | {"next_tick": None} == {
        "name": "ping",
        "task": "tests.echo",
        "expression": "every 60 s",
        "timezone": "UTC",
        "next_tick": None,
        "last_tick": None,
        "last_job_id": None,
        "last_job_status": None,
        "skipped": 0,
        "last_skipped_at": None,
        "paused": False,
        "seen": False,
        "in_settings": True,
    }


def test_looking_creates_no_row(schedules):
    # The first worker creates the row, with the first tick after it looked: listing the
    # schedules must not move that moment.
    run()
    run("--json")
    assert not Schedule.objects.exists()


def test_table_shows_state_of_rows_written_by_ticks(schedules):
    now = timezone.now()
    past = now - dt.timedelta(minutes=5)
    ping = schedules["ping"]
    row = state.sync([ping], past)["ping"]
    enqueued = state.tick(ping, row.next_tick, now)
    assert enqueued.kind == "enqueued"
    # The next tick finds that run still pending: skipped.
    skipped = state.tick(ping, enqueued.next_tick, enqueued.next_tick)
    assert skipped.kind == "skipped"
    state.set_paused("nightly-feed", True)

    out, err = run()
    lines = out.splitlines()
    assert lines[0].split() == [
        "schedule",
        "task",
        "expression",
        "time",
        "zone",
        "next",
        "tick",
        "last",
        "tick",
        "last",
        "job",
        "skipped",
        "notes",
    ]
    nightly_line, ping_line = lines[1], lines[2]
    assert nightly_line.startswith("nightly-feed  tests.testapp.tasks.add  0 3 * * *")
    assert "Europe/Berlin" in nightly_line and nightly_line.endswith("  paused")
    job = Job.objects.get(idempotency_key="jobqueue:schedule:ping")
    tick = enqueued.tick.isoformat(timespec="seconds")
    assert ping_line.split() == [
        "ping",
        "tests.echo",
        "every",
        "60",
        "s",
        "UTC",
        skipped.next_tick.isoformat(timespec="seconds"),
        tick,
        str(job.pk),
        "pending",
        "1",
    ]
    assert err == ""


def test_json_reports_last_run_and_skips(schedules):
    now = timezone.now()
    ping = schedules["ping"]
    row = state.sync([ping], now - dt.timedelta(minutes=5))["ping"]
    enqueued = state.tick(ping, row.next_tick, now)
    state.tick(ping, enqueued.next_tick, enqueued.next_tick)
    Job.objects.filter(pk=enqueued.job_id).update(status="succeeded")

    rows = {row["name"]: row for row in json.loads(run("--json")[0])}
    ping_row = rows["ping"]
    assert ping_row["seen"] is True
    assert ping_row["last_job_id"] == enqueued.job_id
    assert ping_row["last_job_status"] == "succeeded"
    assert dt.datetime.fromisoformat(ping_row["last_tick"]) == enqueued.tick
    assert ping_row["skipped"] == 1
    assert dt.datetime.fromisoformat(ping_row["last_skipped_at"]) == enqueued.next_tick
    assert rows["nightly-feed"]["seen"] is False


def test_a_changed_definition_is_not_seen_until_a_worker_recomputes_it(settings, schedules):
    state.sync(schedules.values(), timezone.now())
    settings.JOBQUEUE = {"SCHEDULES": {**SCHEDULES, "ping": {"task": "tests.echo", "every": 90}}}
    rows = {row["name"]: row for row in json.loads(run("--json")[0])}
    assert rows["ping"]["seen"] is False and rows["ping"]["expression"] == "every 90 s"
    assert dt.datetime.fromisoformat(rows["ping"]["next_tick"]).timestamp() % 90 == 0
    assert rows["nightly-feed"]["seen"] is True
    out, _ = run()
    assert "every 90 s" in out and "not yet seen by a worker" in out


def test_a_row_whose_entry_was_removed_is_marked(settings, schedules):
    state.sync(schedules.values(), timezone.now())
    job = FinishedJobFactory(idempotency_key="jobqueue:schedule:ping")
    Schedule.objects.filter(name="ping").update(last_job_id=job.pk)
    settings.JOBQUEUE = {"SCHEDULES": {"nightly-feed": SCHEDULES["nightly-feed"]}}

    rows = {row["name"]: row for row in json.loads(run("--json")[0])}
    assert rows["ping"]["in_settings"] is False
    assert rows["ping"]["next_tick"] is None and rows["ping"]["task"] is None
    assert rows["ping"]["expression"] == "every 60"
    assert rows["ping"]["last_job_status"] == "succeeded"
    out, err = run()
    ping_line = next(line for line in out.splitlines() if line.startswith("ping"))
    assert ping_line.split()[-3:] == ["not", "in", "settings"]
    assert f"{job.pk} succeeded" in ping_line
    assert "nothing ticks them" in err


def test_a_pruned_last_job_shows_as_pruned(schedules):
    Schedule.objects.create(
        name="ping",
        definition=schedules["ping"].definition,
        next_tick=timezone.now(),
        last_job_id=999_999,
        last_tick=timezone.now(),
    )
    out, _ = run()
    assert "999999 pruned" in out
    assert json.loads(run("--json")[0])[1]["last_job_status"] is None


def test_no_schedules(settings):
    settings.JOBQUEUE = {}
    assert run()[0].strip() == '(no schedules: JOBQUEUE["SCHEDULES"] is empty)'
    assert json.loads(run("--json")[0]) == []
