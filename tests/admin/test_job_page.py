"""A job's page: read-only, formatted JSON, errors with tracebacks, steps, timeline, buttons."""

import datetime as dt

import pytest
from django.utils import timezone

from jobqueue.models import Job
from tests.factories import FinishedJobFactory, JobFactory

pytestmark = pytest.mark.django_db


def page(job):
    return f"/admin/jobqueue/job/{job.pk}/change/"


def failed_job(**kwargs):
    enqueued = timezone.now() - dt.timedelta(minutes=10)
    return JobFactory(
        status="failed",
        args=[1, {"sku": "A<1>"}],
        kwargs={"notify": True},
        attempts=2,
        max_attempts=2,
        enqueued_at=enqueued,
        started_at=enqueued + dt.timedelta(minutes=2),
        finished_at=enqueued + dt.timedelta(minutes=3),
        last_error="ValueError: bad row",
        errors=[
            {
                "type": "ValueError",
                "message": "bad row",
                "traceback": 'Traceback (most recent call last):\n  File "feed.py", line 3',
                "attempt": 1,
                "at": (enqueued + dt.timedelta(minutes=1)).isoformat(),
                "worker": "web-1:10:aa",
            },
            {
                "type": "WorkerLost",
                "message": "The worker stopped renewing its lease.",
                "traceback": "",
                "attempt": 2,
                "at": (enqueued + dt.timedelta(minutes=3)).isoformat(),
                "worker": "web-2:11:bb",
            },
        ],
        steps={"export": {"rows": 3}},
        **kwargs,
    )


def test_the_page_shows_everything_read_only(operator):
    job = failed_job()
    response = operator.get(page(job))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'name="_save"' not in html
    # A real title: the id and the task's own name, not "View job".
    assert f"<h1>Job #{job.pk} (add)</h1>" in html and "View job" not in html
    assert f"| Job #{job.pk} (add) |" in html
    assert "&quot;sku&quot;: &quot;A&lt;1&gt;&quot;" in html  # formatted, escaped JSON
    assert "&quot;notify&quot;: true" in html
    assert "Traceback (most recent call last)" in html and "feed.py" in html
    assert "WorkerLost: The worker stopped renewing its lease." in html
    assert "&quot;rows&quot;: 3" in html
    timeline = html[html.index("jobqueue-timeline") :]
    order = [
        "Enqueued on queue default",
        "Attempt 1 failed on web-1:10:aa: bad row",
        "Latest attempt started",
        "Attempt 2: worker web-2:11:bb lost",
        "Finished: failed",
    ]
    positions = [timeline.index(text) for text in order]
    assert positions == sorted(positions)


def test_a_crash_is_shown_in_the_words_its_fields_give(operator):
    at = timezone.now() - dt.timedelta(minutes=1)
    crash = {
        "type": "WorkerLost",
        "message": "",  # what a crash's entry holds before the store writes its words
        "traceback": "",
        "attempt": 1,
        "at": at.isoformat(),
        "worker": "web-2:11:bb",
        "reason": "The worker process 11 died (killed by SIGKILL).",
        "host": "web-2",
        "pid": 11,
        "last_heartbeat": "2026-11-29T18:14:45+00:00",
        "lease_until": "2026-11-29T18:19:45+00:00",
        "policy": "park",
        "crashes": 1,
        "max_crashes": 3,
        "outcome": "abandoned",
    }
    job = JobFactory(status="abandoned", attempts=0, crashes=1, errors=[crash], finished_at=at)
    html = operator.get(page(job)).content.decode()
    words = (
        "The worker process 11 died (killed by SIGKILL). Worker web-2:11:bb (host web-2, "
        "pid 11, last heartbeat 2026-11-29 18:14:45 UTC), lease held until 2026-11-29 "
        "18:19:45 UTC. Parked as abandoned (on_crash=&quot;park&quot;): retry or discard "
        "it by hand."
    )
    assert f"WorkerLost: {words}" in html
    timeline = html[html.index("jobqueue-timeline") :]
    assert "Attempt 1: worker web-2:11:bb lost: The worker process 11 died" in timeline


def test_a_post_to_the_page_changes_nothing(operator):
    job = failed_job()
    response = operator.post(page(job), {"queue": "hacked", "status": "succeeded"})
    assert response.status_code == 403
    assert Job.objects.get(pk=job.pk).queue == "default"


def test_retry_and_discard_buttons(operator):
    job = failed_job()
    html = operator.get(page(job)).content.decode()
    assert f'action="/admin/jobqueue/job/{job.pk}/retry/"' in html
    # Discard is a red link to a confirmation page, not a second button like Retry.
    assert f'<a href="/admin/jobqueue/job/{job.pk}/discard/" class="jobqueue-discard"' in html
    assert "var(--delete-button-bg" in html
    response = operator.post(f"/admin/jobqueue/job/{job.pk}/retry/", follow=True)
    assert response.redirect_chain[-1][0] == page(job)
    assert "Retried 1 job." in response.content.decode()
    assert Job.objects.get(pk=job.pk).status == "pending"
    confirm = operator.get(f"/admin/jobqueue/job/{job.pk}/discard/").content.decode()
    assert "Discard this job?" in confirm and "delete-confirmation" in confirm
    assert f'action="/admin/jobqueue/job/{job.pk}/discard/"' in confirm
    assert f'href="{page(job)}" class="button cancel-link"' in confirm
    assert Job.objects.get(pk=job.pk).status == "pending"  # asking changes nothing
    response = operator.post(f"/admin/jobqueue/job/{job.pk}/discard/", follow=True)
    assert "Discarded 1 job." in response.content.decode()
    assert Job.objects.get(pk=job.pk).status == "discarded"


def test_buttons_only_where_they_apply(operator):
    done = FinishedJobFactory()
    html = operator.get(page(done)).content.decode()
    assert "/retry/" not in html and "/discard/" not in html
    pending = JobFactory()
    html = operator.get(page(pending)).content.decode()
    assert "/retry/" not in html and f"/admin/jobqueue/job/{pending.pk}/discard/" in html
    held = JobFactory(status="abandoned", lease_until=timezone.now() + dt.timedelta(minutes=2))
    assert "/retry/" not in operator.get(page(held)).content.decode()


def test_buttons_need_change_permission_and_a_post(viewer, operator):
    job = failed_job()
    assert "/retry/" not in viewer.get(page(job)).content.decode()
    assert viewer.post(f"/admin/jobqueue/job/{job.pk}/retry/").status_code == 403
    assert operator.get(f"/admin/jobqueue/job/{job.pk}/retry/").status_code == 405
    assert Job.objects.get(pk=job.pk).status == "failed"


def test_the_button_reports_a_refusal(operator):
    job = failed_job(idempotency_key="feed:9")
    JobFactory(idempotency_key="feed:9")  # the newer, unfinished copy
    response = operator.post(f"/admin/jobqueue/job/{job.pk}/retry/", follow=True)
    assert (
        "Retried 0 jobs, skipped 1 job because a newer unfinished job holds its idempotency key."
        in response.content.decode()
    )
    assert Job.objects.get(pk=job.pk).status == "failed"


def test_the_confirmation_says_a_running_job_is_cancelled(operator):
    lease = timezone.now() + dt.timedelta(minutes=5)
    job = JobFactory(status="running", token="t" * 32, worker="w", lease_until=lease)
    html = operator.get(f"/admin/jobqueue/job/{job.pk}/discard/").content.decode()
    assert "1 of them is running: it is cancelled" in html
    assert operator.get(f"/admin/jobqueue/job/{job.pk}/discard/").status_code == 200


def test_the_confirmation_needs_change_permission(viewer):
    job = failed_job()
    assert viewer.get(f"/admin/jobqueue/job/{job.pk}/discard/").status_code == 403
    assert viewer.post(f"/admin/jobqueue/job/{job.pk}/discard/").status_code == 403


def test_no_null_and_no_empty_brackets(operator):
    job = JobFactory(status="failed", args=[], kwargs={}, result=None, errors=[], steps={})
    html = operator.get(page(job)).content.decode()
    for field in ("args_json", "kwargs_json", "result_json", "errors_html", "steps_html"):
        cell = html[html.index(f"field-{field}") :]
        cell = cell[: cell.index("</div>", cell.index('class="readonly"'))]
        assert cell.endswith('class="readonly">\N{EM DASH}'), field
    assert ">null<" not in html and ">[]<" not in html and ">{}<" not in html


def test_every_time_on_the_page_reads_to_the_second(operator):
    job = failed_job()
    html = operator.get(page(job)).content.decode()
    first = dt.datetime.fromisoformat(job.errors[0]["at"])
    exact = first.strftime("%Y-%m-%d %H:%M:%S UTC")
    # In the errors and in the timeline: seconds shown, date, zone and age on hover.
    assert html.count(f'title="{exact} (') == 2
    assert "a.m." not in html and "p.m." not in html
    assert f'<time datetime="{job.run_at.isoformat()}"' in html


def test_a_limited_job_shows_its_keys_and_limits(operator):
    job = JobFactory(
        concurrency_key="sync_tenant:7",
        concurrency_limit=2,
        rate_key="partner:3",
        rate_limit=10,
        rate_per=1.0,
        rate_burst=0,
    )
    html = operator.get(page(job)).content.decode()
    limits = html[html.index('class="fieldset-heading">Limits</h2>') :]
    assert "sync_tenant:7" in limits and "partner:3" in limits
    assert '<div class="readonly">2</div>' in limits and '<div class="readonly">10</div>' in limits
