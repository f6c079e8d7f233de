"""End to end in a real headless Chromium: pause a queue from the Queues page, see it paused,
resume it.

Debian's ``chromium``, driven by Playwright (never ``playwright install``). Skipped when
either is missing, except in CI (``CI=true``), where a missing browser is a failure.
"""

from __future__ import annotations

from jobqueue.store import pauses
from tests.admin.browser import log_in, screenshots
from tests.factories import JobFactory


def test_an_operator_pauses_and_resumes_a_queue_in_a_real_browser(
    live_server, django_user_model, browser, tmp_path
):
    django_user_model.objects.create_superuser("ops", "ops@example.com", "correct horse")
    JobFactory.create_batch(3, task_name="shop.tasks.send_receipt", queue="emails")
    JobFactory(task_name="shop.tasks.rebuild_feed", queue="feeds")
    shots = screenshots(tmp_path)
    page = browser.new_page(viewport={"width": 1600, "height": 640})
    page.set_default_timeout(15_000)
    log_in(page, live_server, "ops", "correct horse")

    page.goto(f"{live_server.url}/admin/jobqueue/queuesummary/")
    emails = page.locator("#result_list tbody tr", has_text="emails")
    assert emails.locator(".jobqueue-pause-state").inner_text() == "active"
    emails.locator('button[value="pause"]').click()
    page.locator(".messagelist .success").wait_for()
    assert 'Paused queue "emails"' in page.locator(".messagelist").inner_text()
    emails = page.locator("#result_list tbody tr", has_text="emails")
    assert emails.locator(".jobqueue-pause-state").inner_text() == "paused"
    feeds = page.locator("#result_list tbody tr", has_text="feeds")
    assert feeds.locator(".jobqueue-pause-state").inner_text() == "active"
    assert pauses.is_paused("emails") and not pauses.is_paused("feeds")
    page.screenshot(path=str(shots / "admin-queues-paused.png"))

    emails.locator('button[value="resume"]').click()
    page.locator(".messagelist .success").wait_for()
    assert 'Resumed queue "emails"' in page.locator(".messagelist").inner_text()
    emails = page.locator("#result_list tbody tr", has_text="emails")
    assert emails.locator(".jobqueue-pause-state").inner_text() == "active"
    assert not pauses.is_paused("emails")
