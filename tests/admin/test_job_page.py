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
    assert "View job" in html and 'name="_save"' not in html
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
    assert f'action="/admin/jobqueue/job/{job.pk}/discard/"' in html
    response = operator.post(f"/admin/jobqueue/job/{job.pk}/retry/", follow=True)
    assert response.redirect_chain[-1][0] == page(job)
    assert "Retried 1 job." in response.content.decode()
    assert Job.objects.get(pk=job.pk).status == "pending"
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
