"""End to end in a real headless Chromium: the dashboard with a day of history renders its
charts, one SVG element per value, and its tables; screenshots are saved (see
tests/admin/browser.py for where)."""

from __future__ import annotations

import datetime as dt
import re
import time

import pytest
from django.utils import timezone

from jobqueue.models import QueueSample
from tests.admin.browser import log_in, screenshots
from tests.factories import FinishedJobFactory, JobFactory, WorkerFactory, minute_stat

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = ("shop.tasks.send_order_confirmation", "shop.tasks.rebuild_feed")


def seed(now: dt.datetime) -> None:
    """The last 60 minutes: every minute 10 + i % 7 successes of the first task; every third
    minute 2 failures of the second; starts with waits; the depth of two queues."""
    minute = now.replace(second=0, microsecond=0)
    for i in range(60):
        at = minute - dt.timedelta(minutes=i)
        minute_stat(at, TASKS[0], "succeeded", 10 + i % 7, seconds=0.2, queue="emails")
        minute_stat(at, TASKS[0], "started", 10 + i % 7, seconds=0.04, queue="emails")
        if i % 3 == 0:
            minute_stat(at, TASKS[1], "failed", 2, seconds=4, queue="feeds")
        QueueSample.objects.create(minute=at, queue="emails", due=i % 5, running=2)
        QueueSample.objects.create(minute=at, queue="feeds", due=1, running=0)
    FinishedJobFactory(
        task_name=TASKS[1],
        queue="feeds",
        status="failed",
        finished_at=now,
        last_error="ValueError: row 17 has no price",
    )
    worker = WorkerFactory(id="web-1:4242:9f3a1c", memory=84 * 2**20, concurrency=4)
    JobFactory(
        task_name=TASKS[1],
        queue="feeds",
        status="running",
        worker=worker.id,
        token="t",
        lease_until=now + dt.timedelta(seconds=30),
        started_at=now - dt.timedelta(seconds=42),
    )


def values(page, chart: str, kind: str, series: str) -> list[float]:
    return page.eval_on_selector_all(
        f"#{chart} .{kind}[data-series='{series}']",
        "els => els.map(e => parseFloat(e.getAttribute('data-value')))",
    )


def test_the_dashboard_draws_its_charts_in_a_real_browser(
    live_server, django_user_model, browser, tmp_path
):
    now = timezone.now()
    if now.second >= 40:
        # The page buckets by the minute it renders in: seeded near a minute's end, the
        # window would move on before the charts are drawn. Start in a fresh minute.
        time.sleep(60.5 - now.second - now.microsecond / 1e6)
        now = timezone.now()
    seed(now)
    django_user_model.objects.create_superuser("ops", "ops@example.com", "correct horse")
    shots = screenshots(tmp_path)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, live_server, "ops", "correct horse")
    page.goto(f"{live_server.url}/admin/jobqueue/job/")
    page.click("a.jobqueue-dashboard-link")
    page.wait_for_selector("svg#jq-finished")
    assert page.title().startswith("Dashboard")

    # Finished per minute, stacked: 60 succeeded bars, 20 failed ones, with their values.
    # (The 61st bucket, the minute 60 ago, may hold the oldest seeded minute or not.)
    succeeded = values(page, "jq-finished", "jq-bar", "succeeded")
    assert len(succeeded) == 60
    assert sorted(set(succeeded)) == [10, 11, 12, 13, 14, 15, 16]
    assert values(page, "jq-finished", "jq-bar", "failed") == [2] * 20
    assert page.locator("#jq-finished .jq-bar").first.bounding_box()["height"] > 0
    # Depth, summed over the queues: 60 points of each line.
    due = values(page, "jq-depth", "jq-point", "due")
    assert len(due) == 60 and set(due) == {1, 2, 3, 4, 5}
    assert values(page, "jq-depth", "jq-point", "running") == [2] * 60
    # Waits of 0.04 s: p50 and p95 both in the bucket up to 0.05 s.
    assert values(page, "jq-wait", "jq-point", "p95") == [0.05] * 60
    # The text alternative: a title and a description for each chart, and a data table.
    assert page.locator("svg.jq-chart title[id$='-title']").count() == 3
    assert page.get_attribute("#jq-depth", "role") == "img"
    page.click("#jq-finished-figure summary")
    assert page.locator("#jq-finished-figure table.jq-data tbody tr").count() == 60

    row = page.locator(f"#jq-tasks tr[data-task='{TASKS[1]}']")
    assert row.locator(".jq-failure-rate").inner_text() == "100 %"
    assert "ValueError: row 17 has no price" in row.locator(".jq-last-failure").inner_text()
    worker = page.locator("#jq-workers tr[data-worker='web-1:4242:9f3a1c']")
    assert "84.0" in worker.locator(".jq-memory").inner_text()
    running = re.search(r"rebuild_feed \((\d+) s\)", worker.locator(".jq-running").inner_text())
    assert running and 42 <= int(running[1]) < 120
    page.click("#jq-finished-figure summary")  # closed again for the picture
    page.screenshot(path=str(shots / "admin-dashboard.png"), full_page=True)

    page.click("nav.jq-ranges a:text('24 h')")
    page.wait_for_selector("nav.jq-ranges strong:text('24 h')")
    # Ten-minute buckets: 60 minutes of successes fall into 6 or 7 bars, summing the same.
    day = values(page, "jq-finished", "jq-bar", "succeeded")
    assert 6 <= len(day) <= 7 and sum(day) == sum(succeeded)
    page.screenshot(path=str(shots / "admin-dashboard-24h.png"))
