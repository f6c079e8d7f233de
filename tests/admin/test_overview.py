"""The queues overview and the live workers, reachable from the admin index."""

import datetime as dt

import django
import pytest
from django.utils import timezone

from jobqueue.models import Worker
from tests.factories import FinishedJobFactory, JobFactory

pytestmark = pytest.mark.django_db


def test_reachable_from_the_admin_index(operator):
    html = operator.get("/admin/").content.decode()
    for url in ("/admin/jobqueue/job/", "/admin/jobqueue/queuesummary/", "/admin/jobqueue/worker/"):
        assert f'href="{url}"' in html
    assert ">Queues<" in html and ">Workers<" in html


def test_queues_overview_has_the_figures_of_jobs_queues(operator):
    JobFactory.create_batch(2, queue="emails")
    JobFactory(queue="emails", run_at=timezone.now() + dt.timedelta(hours=1))
    JobFactory(queue="emails", status="failed")
    JobFactory(queue="feeds", status="abandoned")
    FinishedJobFactory(queue="feeds")
    response = operator.get("/admin/jobqueue/queuesummary/")
    assert response.status_code == 200
    rows = {row["queue"]: row for row in response.context["rows"]}
    assert [count for count, _ in rows["emails"]["cells"]] == [2, 1, 0, 1, 0]
    assert [count for count, _ in rows["feeds"]["cells"]] == [0, 0, 0, 0, 1]
    html = response.content.decode()
    assert 'href="/admin/jobqueue/job/?queue=feeds&amp;status__exact=abandoned"' in html


def test_queues_overview_is_read_only_and_needs_job_permissions(operator, outsider):
    assert operator.get("/admin/jobqueue/queuesummary/add/").status_code == 404
    assert outsider.get("/admin/jobqueue/queuesummary/").status_code == 403


def test_workers_list_shows_live_workers_and_the_jobs_they_hold(admin_client, viewer):
    Worker.objects.create(
        id="web-1:10:abc",
        hostname="web-1",
        pid=10,
        pool="default",
        queues={"queues": None, "excluded": ["feeds"]},
        concurrency=4,
    )
    JobFactory.create_batch(2, status="running", worker="web-1:10:abc", token="x" * 32)
    response = admin_client.get("/admin/jobqueue/worker/")
    html = response.content.decode()
    assert "web-1:10:abc" in html and "* except feeds" in html
    assert 'status__exact=running&amp;worker=web-1%3A10%3Aabc">2</a>' in html
    assert 'alt="True"' in html  # alive: its heartbeat is recent
    assert admin_client.get("/admin/jobqueue/worker/web-1:10:abc/change/").status_code == 200
    assert admin_client.get("/admin/jobqueue/worker/add/").status_code == 403
    # Staff without the worker permission do not see them.
    assert viewer.get("/admin/jobqueue/worker/").status_code == 403


def test_workers_page_is_titled_workers_and_shows_seconds(admin_client):
    started = timezone.now().replace(microsecond=0) - dt.timedelta(days=2, seconds=3)
    Worker.objects.create(
        id="web-1:10:abc",
        hostname="web-1",
        pid=10,
        pool="default",
        queues={},
        concurrency=1,
        started_at=started,
    )
    html = admin_client.get("/admin/jobqueue/worker/").content.decode()
    assert "<title>Workers | " in html and "<h1>Workers</h1>" in html
    assert "Select worker to view" not in html
    assert f'<time datetime="{started.isoformat()}"' in html
    assert f">{started:%Y-%m-%d %H:%M:%S}</time>" in html


@pytest.mark.parametrize("url", ["/admin/jobqueue/queuesummary/", "/admin/jobqueue/schedule/"])
def test_overview_pages_have_djangos_own_breadcrumbs_and_stylesheet(admin_client, url):
    html = admin_client.get(url).content.decode()
    crumbs = html[html.index('<nav aria-label="Breadcrumbs">') :]
    crumbs = crumbs[: crumbs.index("</nav>")]
    # The markup of the running Django's changelist: an ol since Django 6.1, a div before.
    if django.VERSION >= (6, 1):
        assert '<ol class="breadcrumbs">' in crumbs and '<li aria-current="page">' in crumbs
    else:
        assert '<div class="breadcrumbs">' in crumbs and "&rsaquo;" in crumbs
    assert 'href="/admin/jobqueue/">Job queue</a>' in crumbs
    assert "admin/css/changelists.css" in html


def test_the_app_is_named_job_queue_so_no_crumb_reads_jobs_jobs(admin_client):
    html = admin_client.get("/admin/jobqueue/job/").content.decode()
    crumbs = html[html.index('class="breadcrumbs"') :]
    crumbs = crumbs[: crumbs.index("</nav>")]
    assert "Job queue" in crumbs and "Jobs" in crumbs
