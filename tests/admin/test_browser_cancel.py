"""End to end in a real headless Chromium: an operator discards a running job from its page,
and the handler, in a real ``runjobs`` worker, sees ``ctx.cancelled`` within a second.

Debian's ``chromium``, driven by Playwright (never ``playwright install``). Skipped when
either is missing, except in CI (``CI=true``), where a missing browser is a failure.
"""

from __future__ import annotations

import re
import time

import pytest

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.admin.browser import log_in, screenshots
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = pytest.mark.process

# The heartbeat beats every 100 s and the poll every 25 s: neither can be what tells the
# handler within a second.
SLOW = {"LEASE": 300, "POLL_INTERVAL": 25}
CONFIRM = re.compile(r"^\s*(yes|confirm|discard)", re.IGNORECASE)


def discard_from_the_job_page(page) -> None:
    """Press the page's Discard, and confirm it however the page asks: a dialog, or a
    confirmation form with a submit button of its own."""
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator('[name="jobqueue-discard"], .object-tools :text-is("Discard")').first.click()
    deadline = time.monotonic() + 15
    while "Discarded 1 job" not in _messages(page):
        if time.monotonic() > deadline:
            raise AssertionError(f"no report of the discard; the page says {_messages(page)!r}")
        confirm = page.locator(
            "#content form button[type=submit], #content form input[type=submit]"
        ).filter(has_text=CONFIRM)
        if confirm.count() and confirm.first.is_visible():
            confirm.first.click()
        page.wait_for_timeout(50)


def _messages(page) -> str:
    messages = page.locator(".messagelist")
    return " ".join(messages.all_inner_texts()) if messages.count() else ""


def test_an_operator_discards_a_running_job_and_its_handler_stops_at_once(
    live_server, django_user_model, browser, tmp_path, start_worker
):
    django_user_model.objects.create_superuser("ops", "ops@example.com", "correct horse")
    worker = start_worker("--concurrency", "2", settings=SLOW)
    wait_for(lambda: WorkerRow.objects.exists(), timeout=30, message="the worker to register")
    job = tasks.until_cancelled.enqueue(label="browser")
    wait_for(
        lambda: Execution.objects.filter(label="browser:start").exists(),
        timeout=30,
        message="the handler to start",
    )

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(15_000)
    log_in(page, live_server, "ops", "correct horse")
    page.goto(f"{live_server.url}/admin/jobqueue/job/{job.pk}/change/")
    assert page.locator(".field-status_badge .jobqueue-status").inner_text() == "running"
    discard_from_the_job_page(page)
    assert "1 was running" in _messages(page)
    assert page.locator(".field-status_badge .jobqueue-status").inner_text() == "discarded"

    wait_for(
        lambda: Execution.objects.filter(label="browser:cancelled").exists(),
        timeout=10,
        interval=0.01,
        message="the handler to see ctx.cancelled",
    )
    row = Job.objects.get(pk=job.pk)
    seen = Execution.objects.get(label="browser:cancelled").created
    # finished_at is the discard's own moment, written by its statement.
    latency = (seen - row.finished_at).total_seconds()
    assert latency < 1.0, latency
    wait_for(
        lambda: "outcome discarded" in worker.output(),
        timeout=10,
        message="the late success to be refused",
    )
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.result) == ("discarded", None)
    page.screenshot(path=str(screenshots(tmp_path) / "admin-job-cancelled.png"), full_page=True)
