"""The admin's polish in a real headless Chromium at 1,400 px: the changelist fits, the
Queues page's breadcrumbs are styled as the changelist's, Discard asks first, and Retry
all failed works from the Queues page."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from jobqueue.models import Job
from tests.admin.browser import log_in, screenshots
from tests.factories import FinishedJobFactory, JobFactory

WIDTH = 1400


def jobs() -> list[Job]:
    """A changelist as wide as real ones get: long task names, long errors, every status."""
    now = timezone.now()
    long_error = (
        "psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "
        '"shop_order_reference_key" DETAIL: Key (reference)=(INV-2026-000417) already exists.'
    )
    failed = JobFactory.create_batch(
        2,
        task_name="shop.integrations.accounting.tasks.export_invoices_to_ledger",
        queue="accounting-exports",
        status="failed",
        attempts=5,
        max_attempts=5,
        crashes=1,
        finished_at=now,
        last_error=long_error,
    )
    JobFactory(
        task_name="shop.tasks.rebuild_feed",
        queue="feeds",
        status="abandoned",
        crashes=1,
        last_error="The worker stopped renewing its lease (killed, out of memory, or lost).",
    )
    JobFactory(
        task_name="shop.tasks.send_newsletter",
        queue="emails",
        run_at=now + dt.timedelta(hours=1),
    )
    FinishedJobFactory.create_batch(3, task_name="shop.tasks.send_order_confirmation")
    return failed


def open_admin(browser, live_server, django_user_model):
    django_user_model.objects.create_superuser("ops", "ops@example.com", "correct horse")
    page = browser.new_page(viewport={"width": WIDTH, "height": 800})
    page.set_default_timeout(15_000)
    log_in(page, live_server, "ops", "correct horse")
    page.wait_for_url("**/admin/")
    return page


def test_the_changelist_fits_1400_px(live_server, django_user_model, browser, tmp_path):
    jobs()
    page = open_admin(browser, live_server, django_user_model)
    page.goto(f"{live_server.url}/admin/jobqueue/job/")
    fits = page.evaluate(
        """() => {
            const table = document.querySelector('#result_list');
            const box = table.closest('.results');
            return [table.scrollWidth, box.clientWidth,
                    document.documentElement.scrollWidth, document.documentElement.clientWidth];
        }"""
    )
    table, container, document_width, viewport = fits
    assert table <= container, fits
    assert document_width <= viewport, fits
    for column in ("Updated at", "Last error"):
        header = page.locator("#result_list thead th", has_text=column)
        box = header.bounding_box()
        assert header.is_visible() and box is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, (column, box)
    # The whole error is there on hover.
    error = page.locator("#result_list .jobqueue-error").last
    assert "already exists." in error.get_attribute("title")
    page.screenshot(path=str(screenshots(tmp_path) / "admin-changelist-1400.png"))


def test_the_queues_breadcrumbs_look_like_the_changelists(
    live_server, django_user_model, browser, tmp_path
):
    jobs()
    page = open_admin(browser, live_server, django_user_model)
    style = """() => {
        const crumbs = document.querySelector('.breadcrumbs');
        const link = crumbs.querySelector('a');
        return [getComputedStyle(crumbs).backgroundColor, getComputedStyle(link).color,
                getComputedStyle(crumbs).paddingLeft];
    }"""
    page.goto(f"{live_server.url}/admin/jobqueue/job/")
    changelist = page.evaluate(style)
    page.goto(f"{live_server.url}/admin/jobqueue/queuesummary/")
    queues = page.evaluate(style)
    assert queues == changelist
    assert changelist[0] not in ("rgba(0, 0, 0, 0)", "transparent")  # styled, not bare
    crumbs = page.locator(".breadcrumbs").inner_text().replace("\u203a", " ").split()
    assert crumbs == ["Home", "Job", "queue", "Queues"]


def test_discard_asks_and_retry_does_not(live_server, django_user_model, browser, tmp_path):
    failed, other = jobs()
    shots = screenshots(tmp_path)
    page = open_admin(browser, live_server, django_user_model)

    # On a job's page: Retry is a button, Discard a red link to a confirmation page.
    page.goto(f"{live_server.url}/admin/jobqueue/job/{failed.pk}/change/")
    assert page.locator("h1").inner_text() == f"Job #{failed.pk} (export_invoices_to_ledger)"
    colour = "el => getComputedStyle(el).backgroundColor"
    retry = page.locator('button[name="jobqueue-retry"]').evaluate(colour)
    discard = page.locator("a.jobqueue-discard").evaluate(colour)
    assert discard == "rgb(186, 33, 33)" and retry != discard
    page.click("a.jobqueue-discard")
    page.wait_for_url(f"**/admin/jobqueue/job/{failed.pk}/discard/")
    assert "Discard this job?" in page.locator("#content").inner_text()
    confirm = page.locator('input[name="jobqueue-confirm-discard"]')
    assert confirm.evaluate(colour) == "rgb(186, 33, 33)"
    page.screenshot(path=str(shots / "admin-discard.png"))
    page.click("a.cancel-link")
    page.wait_for_url(f"**/admin/jobqueue/job/{failed.pk}/change/")
    assert Job.objects.get(pk=failed.pk).status == "failed"

    # The changelist's action: the same page, then Confirm.
    page.goto(f"{live_server.url}/admin/jobqueue/job/?status__exact=failed")
    page.check(f'input[name="_selected_action"][value="{failed.pk}"]')
    page.select_option('select[name="action"]', "discard")
    page.click('button[name="index"]')
    page.locator(".jobqueue-discard-question").wait_for()
    assert Job.objects.get(pk=failed.pk).status == "failed"  # asked, nothing done yet
    page.click('input[name="jobqueue-confirm-discard"]')
    page.locator(".messagelist .success").wait_for()
    assert "Discarded 1 job." in page.locator(".messagelist").inner_text()
    assert page.url.endswith("?status__exact=failed")  # back to the filtered list
    assert Job.objects.get(pk=failed.pk).status == "discarded"
    assert Job.objects.get(pk=other.pk).status == "failed"

    # Retry stays one click.
    page.check(f'input[name="_selected_action"][value="{other.pk}"]')
    page.select_option('select[name="action"]', "retry")
    page.click('button[name="index"]')
    page.locator(".messagelist .success").wait_for()
    assert "Retried 1 job." in page.locator(".messagelist").inner_text()


def test_retry_all_failed_of_a_queue(live_server, django_user_model, browser, tmp_path):
    failed = jobs()
    page = open_admin(browser, live_server, django_user_model)
    page.goto(f"{live_server.url}/admin/jobqueue/queuesummary/")
    row = page.locator("#result_list tbody tr", has_text="accounting-exports")
    button = row.locator('button[name="jobqueue-retry-failed"]')
    assert button.inner_text() == "Retry 2 failed"
    assert page.locator(".jobqueue-failed-tasks").is_visible()
    page.screenshot(path=str(screenshots(tmp_path) / "admin-queues.png"), full_page=True)
    button.click()
    page.locator(".messagelist .success").wait_for()
    assert (
        'Queue "accounting-exports": Retried 2 jobs.' in page.locator(".messagelist").inner_text()
    )
    assert [Job.objects.get(pk=j.pk).status for j in failed] == ["pending", "pending"]
    assert page.locator('button[name="jobqueue-retry-failed"]').count() == 0
