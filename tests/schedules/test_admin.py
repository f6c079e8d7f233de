"""The admin's Schedules page: what it lists, Run now, Pause and Resume, who may act."""

import datetime as dt

import django
import pytest
from django.utils import timezone

from jobqueue import conf
from jobqueue.models import Job, Schedule
from jobqueue.schedules import spec, state
from tests.admin.conftest import client_for, staff
from tests.factories import FinishedJobFactory

pytestmark = pytest.mark.django_db

URL = "/admin/jobqueue/schedule/"
ACT = "/admin/jobqueue/schedule/act/"
KEY = "jobqueue:schedule:ping"
SCHEDULES = {
    "nightly-feed": {
        "task": "tests.testapp.tasks.add",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "args": [1, 2],
    },
    "ping": {"task": "tests.echo", "every": 60, "args": ["ping"], "queue": "emails"},
}


@pytest.fixture(autouse=True)
def schedules(settings):
    settings.JOBQUEUE = {"SCHEDULES": SCHEDULES}


@pytest.fixture
def scheduler(db):
    """Staff who may see and act on schedules (and see jobs)."""
    return client_for(
        staff(
            "scheduler", "jobqueue.view_schedule", "jobqueue.change_schedule", "jobqueue.view_job"
        )
    )


@pytest.fixture
def watcher(db):
    """Staff who may only look at schedules."""
    return client_for(staff("watcher", "jobqueue.view_schedule"))


def act(client, action, name):
    response = client.post(ACT, {"schedule": name, "action": action}, follow=True)
    assert response.status_code == 200
    return [str(m) for m in response.context["messages"]]


def rows(response):
    return {item["row"].name: item["row"] for item in response.context["rows"]}


def ping_spec():
    return next(s for s in spec.load(conf.get()) if s.name == "ping")


def test_lists_every_schedule_with_the_figures_of_the_command(scheduler):
    now = timezone.now()
    ping = ping_spec()
    row = state.sync([ping], now - dt.timedelta(minutes=5))["ping"]
    enqueued = state.tick(ping, row.next_tick, now)
    state.tick(ping, enqueued.next_tick, enqueued.next_tick)  # skipped: still pending

    response = scheduler.get(URL)
    assert response.status_code == 200
    listed = rows(response)
    assert list(listed) == ["nightly-feed", "ping"]
    assert listed["ping"].last_job_id == enqueued.job_id and listed["ping"].skipped == 1
    html = response.content.decode()
    # The breadcrumbs in the running Django's markup, which its stylesheet styles.
    breadcrumbs = (
        '<ol class="breadcrumbs">' if django.VERSION >= (6, 1) else '<div class="breadcrumbs">'
    )
    assert breadcrumbs in html
    for text in (
        "tests.testapp.tasks.add",
        "0 3 * * *",
        "Europe/Berlin",
        "every 60 s",
        "03:00:00 CE",
    ):
        assert text in html
    # Not yet seen: no row, the next tick computed from now, and said so.
    assert not Schedule.objects.filter(name="nightly-feed").exists()
    assert "not yet seen by a worker" in html
    # The last run links to its job's page, with its status; the name to all its runs.
    assert f'href="/admin/jobqueue/job/{enqueued.job_id}/change/"' in html
    assert "jobqueue-status-pending" in html
    assert 'href="/admin/jobqueue/job/?q=jobqueue%3Aschedule%3Aping"' in html
    # The page itself changes nothing.
    assert not Schedule.objects.filter(name="nightly-feed").exists()


def test_linked_from_the_job_changelist_and_the_queues_page(scheduler, admin_client):
    html = admin_client.get("/admin/jobqueue/job/").content.decode()
    assert f'<a href="{URL}" class="jobqueue-schedules-link">Schedules</a>' in html
    assert f'href="{URL}"' in admin_client.get("/admin/jobqueue/queuesummary/").content.decode()
    assert f'href="{URL}"' in scheduler.get("/admin/").content.decode()


def test_read_only(admin_client):
    state.sync(spec.load(conf.get()), timezone.now())
    assert admin_client.get(f"{URL}add/").status_code == 404
    assert admin_client.get(f"{URL}ping/change/").status_code == 404
    assert admin_client.get(f"{URL}ping/delete/").status_code == 404
    assert admin_client.get(ACT).status_code == 405  # actions are posted only
    assert ">Add schedule<" not in admin_client.get("/admin/").content.decode()


def test_run_now_enqueues_one_job_now(scheduler):
    before = timezone.now()
    messages = act(scheduler, "run_now", "ping")
    job = Job.objects.get(idempotency_key=KEY)
    assert messages == [
        f'Schedule "ping": enqueued <a href="/admin/jobqueue/job/{job.pk}/change/">'
        f"job {job.pk}</a>, due now."
    ]
    assert job.task_name == "tests.echo" and job.args == ["ping"] and job.queue == "emails"
    assert before <= job.run_at <= timezone.now()
    assert Schedule.objects.get(name="ping").last_job_id == job.pk


def test_run_now_is_refused_while_a_run_is_unfinished_naming_it(scheduler):
    act(scheduler, "run_now", "ping")
    job = Job.objects.get(idempotency_key=KEY)
    messages = act(scheduler, "run_now", "ping")
    assert messages == [
        f'Schedule "ping" was not run: its previous run, <a href="/admin/jobqueue/job/{job.pk}'
        f'/change/">job {job.pk}</a>, is still pending. A schedule has at most one unfinished '
        "run: wait for it to finish, or discard it."
    ]
    Job.objects.filter(pk=job.pk).update(status="running")
    assert "is still running" in act(scheduler, "run_now", "ping")[0]
    assert Job.objects.filter(idempotency_key=KEY).count() == 1
    # A failed run frees the schedule.
    Job.objects.filter(pk=job.pk).update(status="failed")
    assert "enqueued" in act(scheduler, "run_now", "ping")[0]
    assert Job.objects.filter(idempotency_key=KEY).count() == 2


def test_a_row_no_longer_in_settings_is_marked_and_not_run(settings, scheduler):
    state.sync(spec.load(conf.get()), timezone.now())
    old = FinishedJobFactory(idempotency_key=KEY)
    Schedule.objects.filter(name="ping").update(last_job_id=old.pk)
    settings.JOBQUEUE = {"SCHEDULES": {"nightly-feed": SCHEDULES["nightly-feed"]}}

    response = scheduler.get(URL)
    assert rows(response)["ping"].in_settings is False
    html = response.content.decode()
    assert '<strong class="errornote">not in settings</strong>' in html
    assert html.count('value="run_now"') == 1  # only nightly-feed offers it
    assert act(scheduler, "run_now", "ping") == [
        'Schedule "ping" is not in JOBQUEUE["SCHEDULES"] any more, so there is nothing to run: '
        "its row is what an earlier configuration left."
    ]
    assert list(Job.objects.values_list("pk", flat=True)) == [old.pk]
    assert act(scheduler, "run_now", "nope") == ['There is no schedule named "nope".']


def test_pause_and_resume_are_kept_in_the_database(scheduler):
    assert act(scheduler, "pause", "nightly-feed") == [
        'Paused schedule "nightly-feed": its ticks pass without enqueuing, on every host, '
        "until you resume it."
    ]
    # Pausing a schedule no worker has seen yet creates its row, with its first tick.
    row = Schedule.objects.get(name="nightly-feed")
    assert row.paused and row.next_tick > timezone.now()
    assert act(scheduler, "pause", "nightly-feed") == [
        'Schedule "nightly-feed" was already paused.'
    ]
    html = scheduler.get(URL).content.decode()
    assert 'value="resume"' in html and html.count('value="pause"') == 1  # ping's

    # What a worker's tick does with it: the tick passes, nothing is enqueued.
    nightly = next(s for s in spec.load(conf.get()) if s.name == "nightly-feed")
    passed = state.tick(nightly, row.next_tick, row.next_tick)
    assert passed.kind == "paused" and not Job.objects.exists()

    assert act(scheduler, "resume", "nightly-feed") == [
        'Resumed schedule "nightly-feed": it runs again from its next tick.'
    ]
    assert not Schedule.objects.get(name="nightly-feed").paused
    assert act(scheduler, "resume", "nightly-feed") == ['Schedule "nightly-feed" was not paused.']
    assert act(scheduler, "pause", "nope") == ['There is no schedule named "nope".']


def test_looking_needs_the_view_permission_and_acting_the_change_one(watcher):
    operator = client_for(staff("operator", "jobqueue.view_job", "jobqueue.change_job"))
    response = watcher.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert "ping" in html and 'value="run_now"' not in html and 'value="pause"' not in html
    for action in ("run_now", "pause", "resume"):
        assert watcher.post(ACT, {"schedule": "ping", "action": action}).status_code == 403
    assert not Job.objects.exists() and not Schedule.objects.exists()
    # The job permissions alone show no schedules.
    assert operator.get(URL).status_code == 403
    assert operator.post(ACT, {"schedule": "ping", "action": "run_now"}).status_code == 403


def test_no_schedules(settings, admin_client):
    settings.JOBQUEUE = {}
    html = admin_client.get(URL).content.decode()
    assert 'No schedules: JOBQUEUE["SCHEDULES"] is empty.' in html
