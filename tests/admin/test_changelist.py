"""The job changelist: columns, filters, search, quick links, permissions, a fast count."""

import datetime as dt
from urllib.parse import quote

import pytest
from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db import connection
from django.utils import timezone

from jobqueue.console.admin import EstimatedCountPaginator, JobAdmin, planner_estimate
from jobqueue.models import Job
from tests.factories import FinishedJobFactory, JobFactory

pytestmark = pytest.mark.django_db

URL = "/admin/jobqueue/job/"


def ids(response):
    return sorted(job.pk for job in response.context["cl"].result_list)


def test_columns_show_status_attempts_crashes_and_the_first_line_of_the_error(operator):
    job = JobFactory(
        status="failed",
        attempts=2,
        max_attempts=3,
        crashes=1,
        last_error="ValueError: the feed is empty\nmore detail",
    )
    html = operator.get(URL).content.decode()
    assert 'class="jobqueue-status jobqueue-status-failed"' in html
    # Attempts and crashes under the badge: the columns fit 1,400 px.
    assert "2 / 3, 1 crash</small>" in html
    # The task by its own name, its module on hover.
    assert f'<span class="jobqueue-task" title="{job.task_name}">add</span>' in html
    # One line, cut short by the stylesheet; the whole error on hover.
    assert (
        '<span class="jobqueue-error" title="ValueError: the feed is empty\nmore detail">'
        "ValueError: the feed is empty</span>"
    ) in html
    for header in ("Task", "Queue", "Status", "Run at", "Updated at"):
        assert f">{header}</a>" in html


def test_times_read_to_the_second_with_the_exact_time_on_hover(operator):
    now = timezone.now().replace(microsecond=0)
    job = JobFactory(run_at=now - dt.timedelta(seconds=7))
    Job.objects.filter(pk=job.pk).update(updated_at=now - dt.timedelta(days=3, seconds=5))
    html = operator.get(URL).content.decode()
    run_at = now - dt.timedelta(seconds=7)
    updated = now - dt.timedelta(days=3, seconds=5)
    assert (f'<time datetime="{run_at.isoformat()}" title="{run_at:%Y-%m-%d %H:%M:%S} UTC') in html
    if run_at.date() == now.date():
        assert f">{run_at:%H:%M:%S}</time>" in html
    assert f'title="{updated:%Y-%m-%d %H:%M:%S} UTC (3\xa0days ago)"' in html
    assert f">{updated:%Y-%m-%d %H:%M:%S}</time>" in html


def test_an_empty_error_is_a_dash(operator):
    JobFactory(last_error="")
    html = operator.get(URL).content.decode()
    assert '<td class="field-error">\N{EM DASH}</td>' in html


def test_the_page_is_titled_jobs(operator):
    html = operator.get(URL).content.decode()
    assert "<title>Jobs | " in html and "<h1>Jobs</h1>" in html
    assert "Select job to change" not in html


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status__exact=failed", ["failed"]),
        ("queue=emails", ["emails"]),
        ("task_name=shop.tasks.other", ["other"]),
        ("enqueued_at__gte={today}", ["failed", "emails", "other"]),
    ],
)
def test_filters(operator, query, expected):
    old = timezone.now() - dt.timedelta(days=40)
    jobs = {
        "failed": JobFactory(status="failed"),
        "emails": JobFactory(queue="emails"),
        "other": JobFactory(task_name="shop.tasks.other"),
        "old": FinishedJobFactory(enqueued_at=old),
    }
    # The "Today" link of the date filter, as the sidebar writes it.
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    response = operator.get(f"{URL}?{query.format(today=quote(str(today)))}")
    assert response.status_code == 200
    assert ids(response) == sorted(jobs[name].pk for name in expected)


def test_filter_sidebar_offers_status_queue_task_and_dates(operator):
    JobFactory(queue="emails", task_name="shop.tasks.send")
    html = operator.get(URL).content.decode()
    for option in ("?status__exact=abandoned", "?queue=emails", "?task_name=shop.tasks.send"):
        assert option in html
    assert "By enqueued at" in html and "By finished at" in html


@pytest.mark.parametrize("term", ["id", "task", "key"])
def test_search_by_id_task_and_idempotency_key(operator, term):
    job = JobFactory(task_name="shop.tasks.rebuild_feed", idempotency_key="feed:42")
    JobFactory.create_batch(3)
    q = {"id": str(job.pk), "task": "rebuild_feed", "key": "feed:42"}[term]
    assert ids(operator.get(URL, {"q": q})) == [job.pk]


@pytest.mark.parametrize("q", ["²", "#²", "١٢", "99999999999999999999", "9" * 5000])
def test_a_search_for_odd_text_is_an_empty_list_not_an_error(operator, q):
    JobFactory(task_name="shop.tasks.rebuild_feed")
    response = operator.get(URL, {"q": q})
    assert response.status_code == 200
    assert ids(response) == []


def test_a_search_with_a_nul_byte_is_not_an_error(operator):
    # Django's search form refuses the term (its CharField prohibits NUL), so the list is
    # shown unfiltered; the admin's own search refuses it too, for PostgreSQL's sake.
    assert operator.get(URL, {"q": "feed\x00"}).status_code == 200
    found, _ = JobAdmin(Job, admin.site).get_search_results(None, Job.objects.all(), "a\x00")
    assert found.count() == 0


def test_a_search_for_a_superscript_still_finds_a_task_name_holding_it(operator):
    job = JobFactory(task_name="shop.tasks.square²")
    JobFactory.create_batch(2)
    assert ids(operator.get(URL, {"q": "²"})) == [job.pk]


def test_quick_links_for_failed_and_abandoned(operator):
    JobFactory(status="abandoned")
    html = operator.get(URL).content.decode()
    assert f'href="{URL}?status__exact=failed"' in html
    assert f'href="{URL}?status__exact=abandoned"' in html
    assert "Abandoned (1)" in html


def test_no_full_count_and_the_estimating_paginator():
    assert JobAdmin.show_full_result_count is False
    assert JobAdmin.paginator is EstimatedCountPaginator


def test_an_unfiltered_list_of_a_large_table_uses_the_planner_estimate(
    operator, postgresql_only, monkeypatch
):
    Job.objects.bulk_create([Job(task_name="t") for _ in range(300)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    estimate = planner_estimate(Job.objects.all())
    assert estimate is not None and estimate > 0
    monkeypatch.setattr(EstimatedCountPaginator, "ESTIMATE_ABOVE", 100)
    Job.objects.filter(pk__in=Job.objects.values("pk")[:10]).delete()  # estimate is stale now
    response = operator.get(URL)
    assert response.context["cl"].result_count == estimate
    filtered = operator.get(URL, {"status__exact": "pending"})
    assert filtered.context["cl"].result_count == 290, "a filtered list is counted exactly"


def test_sqlite_has_no_estimate(vendor):
    if vendor != "sqlite":
        pytest.skip("SQLite only")
    assert planner_estimate(Job.objects.all()) is None


def test_only_staff_with_the_apps_permissions_see_it(viewer, outsider, client):
    JobFactory()
    assert viewer.get(URL).status_code == 200
    assert outsider.get(URL).status_code == 403
    assert client.get(URL).status_code == 302  # to the login page


def test_nobody_adds_or_deletes_jobs(admin_client):
    job = JobFactory()
    assert admin_client.get(f"{URL}add/").status_code == 403
    assert admin_client.get(f"{URL}{job.pk}/delete/").status_code == 403
    response = admin_client.get(URL)
    actions = response.context["cl"].model_admin.get_action_choices(response.wsgi_request)
    assert [name for name, _ in actions] == ["", "retry", "discard"]


def test_changelist_class_is_djangos(operator):
    JobFactory()
    assert isinstance(operator.get(URL).context["cl"], ChangeList)
