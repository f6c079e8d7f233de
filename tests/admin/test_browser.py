"""End to end in a real headless Chromium: log in, see the notice, retry an abandoned job,
open the Schedules page.

Debian's ``chromium``, driven by Playwright (never ``playwright install``). Skipped when
either is missing, except in CI (``CI=true``), where a missing browser is a failure.
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from jobqueue import conf
from jobqueue.models import Job
from jobqueue.schedules import spec, state
from tests.admin.browser import log_in, screenshots
from tests.factories import FinishedJobFactory, JobFactory


def jobs() -> tuple[Job, Job]:
    now = timezone.now()
    lost = {
        "type": "WorkerLost",
        "message": "The worker stopped renewing its lease (killed, out of memory, or lost).",
        "traceback": "",
        "attempt": 1,
        "at": (now - dt.timedelta(minutes=3)).isoformat(),
        "worker": "web-2:4242:9f3a1c",
    }
    parked = [
        JobFactory(
            task_name=f"shop.tasks.{name}",
            queue=queue,
            status="abandoned",
            crashes=1,
            on_crash="park",
            worker="web-2:4242:9f3a1c",
            enqueued_at=now - dt.timedelta(minutes=20),
            started_at=now - dt.timedelta(minutes=9),
            finished_at=now - dt.timedelta(minutes=3),
            last_error=lost["message"],
            errors=[lost],
        )
        for name, queue in [("charge_card", "payments"), ("rebuild_feed", "feeds")]
    ]
    JobFactory.create_batch(
        2,
        task_name="shop.tasks.import_broken_feed",
        queue="feeds",
        status="failed",
        attempts=3,
        finished_at=now,
        last_error="ValueError: row 17 has no price",
    )
    FinishedJobFactory.create_batch(
        3, task_name="shop.tasks.send_order_confirmation", queue="emails"
    )
    JobFactory(
        task_name="shop.tasks.send_newsletter", queue="emails", run_at=now + dt.timedelta(hours=1)
    )
    return parked[0], parked[1]


def schedules(settings) -> None:
    """Two schedules: one that ran (and skipped a tick), one no worker has seen yet."""
    settings.JOBQUEUE = {
        "SCHEDULES": {
            "nightly-feed": {
                "task": "tests.testapp.tasks.add",
                "cron": "0 3 * * *",
                "timezone": "Europe/Berlin",
                "args": [1, 2],
            },
            "ping": {"task": "tests.echo", "every": 60, "args": ["ping"]},
        }
    }
    now = timezone.now()
    ping = next(s for s in spec.load(conf.get()) if s.name == "ping")
    row = state.sync([ping], now - dt.timedelta(minutes=5))["ping"]
    enqueued = state.tick(ping, row.next_tick, now)
    state.tick(ping, enqueued.next_tick, enqueued.next_tick)


def test_an_operator_retries_an_abandoned_job_in_a_real_browser(
    live_server, django_user_model, browser, tmp_path, settings
):
    django_user_model.objects.create_superuser("ops", "ops@example.com", "correct horse")
    job, other = jobs()
    schedules(settings)
    shots = screenshots(tmp_path)
    page = browser.new_page(viewport={"width": 1600, "height": 640})
    page.set_default_timeout(15_000)
    log_in(page, live_server, "ops", "correct horse")

    notice = page.locator(".messagelist .warning")
    notice.wait_for()
    assert "2 jobs are abandoned" in notice.inner_text()

    page.goto(f"{live_server.url}/admin/jobqueue/job/")
    page.click("#toggle-nav-sidebar")  # more room for the table in the screenshot
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(shots / "admin-changelist.png"))

    page.click("a.jobqueue-abandoned-link")
    page.wait_for_url("**/admin/jobqueue/job/?status__exact=abandoned")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2
    page.check(f'input[name="_selected_action"][value="{job.pk}"]')
    page.select_option('select[name="action"]', "retry")
    page.click('button[name="index"]')
    page.locator(".messagelist .success").wait_for()
    assert "Retried 1 job." in page.locator(".messagelist").inner_text()
    assert page.locator("#result_list tbody tr").count() == 1

    page.goto(f"{live_server.url}/admin/jobqueue/job/{job.pk}/change/")
    status = page.locator(".field-status_badge .jobqueue-status")
    assert status.inner_text() == "pending"
    page.goto(f"{live_server.url}/admin/jobqueue/job/{other.pk}/change/")
    page.screenshot(path=str(shots / "admin-job.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/jobqueue/job/")
    page.click("a.jobqueue-schedules-link")
    page.wait_for_url("**/admin/jobqueue/schedule/")
    names = page.locator("#result_list tbody tr th").all_inner_texts()
    assert names == ["nightly-feed", "ping"]
    assert "not yet seen by a worker" in page.locator("#result_list").inner_text()
    # Django 6 draws the separators in CSS, Django 5.2 writes them as text.
    crumbs = page.locator(".breadcrumbs").inner_text().replace("\u203a", " ")
    assert crumbs.split() == ["Home", "Job", "queue", "Schedules"]
    page.screenshot(path=str(shots / "admin-schedules.png"))
    assert Job.objects.get(pk=job.pk).status == "pending"
    assert Job.objects.get(pk=other.pk).status == "abandoned"
