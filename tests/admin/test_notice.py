"""The abandoned-jobs notice: every admin page, right users only, cached, cleared by actions."""

import pytest
from django.contrib.admin import helpers
from django.core import checks
from django.core.cache import cache
from django.core.management import call_command

from jobqueue.console.notice import CACHE_KEY, check_middleware
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def notices(response):
    return response.content.decode().count("jobqueue-abandoned-link")


@pytest.mark.parametrize(
    "url",
    [
        "/admin/",
        "/admin/jobqueue/",
        "/admin/jobqueue/job/",
        "/admin/jobqueue/job/?status__exact=failed",
        "/admin/jobqueue/queuesummary/",
        "/admin/jobqueue/worker/",
        "/admin/auth/user/",
        "/admin/password_change/",
    ],
)
def test_shown_on_every_admin_page(admin_client, url):
    JobFactory.create_batch(2, status="abandoned")
    response = admin_client.get(url)
    assert response.status_code == 200
    assert notices(response) == 1
    html = response.content.decode()
    assert "2 jobs are abandoned: their workers died while running them" in html
    assert 'href="/admin/jobqueue/job/?status__exact=abandoned"' in html


def test_shown_to_a_viewer_and_on_a_jobs_page(viewer):
    job = JobFactory(status="abandoned")
    assert notices(viewer.get("/admin/")) == 1
    assert notices(viewer.get(f"/admin/jobqueue/job/{job.pk}/change/")) == 1


def test_not_shown_without_abandoned_jobs(admin_client):
    JobFactory(status="failed")
    assert notices(admin_client.get("/admin/")) == 0


def test_hidden_from_staff_who_may_not_view_jobs(outsider):
    JobFactory(status="abandoned")
    response = outsider.get("/admin/")
    assert response.status_code == 200 and notices(response) == 0


def test_not_on_ajax_requests(admin_client):
    JobFactory(status="abandoned")
    response = admin_client.get("/admin/", headers={"x-requested-with": "XMLHttpRequest"})
    assert notices(response) == 0
    # ... and nothing was queued for the next page either.
    assert notices(admin_client.get("/admin/")) == 1


def test_not_stacked_while_browsing(admin_client):
    JobFactory(status="abandoned")
    for url in ("/admin/", "/admin/jobqueue/job/", "/admin/", "/admin/jobqueue/"):
        assert notices(admin_client.get(url)) == 1


def test_not_stacked_after_a_redirect(admin_client):
    job = JobFactory(status="abandoned")
    response = admin_client.post(f"/admin/jobqueue/job/{job.pk}/discard/", follow=True)
    assert notices(response) == 0  # the discard dropped the cache; none is left
    JobFactory.create_batch(2, status="abandoned")
    response = admin_client.post(f"/admin/jobqueue/job/{job.pk}/retry/", follow=True)
    assert notices(response) == 1


def test_count_is_cached_for_a_minute(admin_client):
    JobFactory(status="abandoned")
    assert "1 job is abandoned" in admin_client.get("/admin/").content.decode()
    assert cache.get(CACHE_KEY) == 1
    JobFactory(status="abandoned")
    html = admin_client.get("/admin/").content.decode()
    assert "1 job is abandoned" in html, "still the cached count"


def test_the_cache_is_dropped_by_the_actions(admin_client):
    first = JobFactory(status="abandoned")
    JobFactory.create_batch(2, status="abandoned")
    admin_client.get("/admin/")  # caches 3
    JobFactory(status="abandoned")  # 4 now, but the cache says 3
    response = admin_client.post(
        "/admin/jobqueue/job/",
        {"action": "retry", "index": "0", helpers.ACTION_CHECKBOX_NAME: [first.pk]},
        follow=True,
    )
    html = response.content.decode()
    assert "Retried 1 job." in html
    assert "3 jobs are abandoned" in html, "counted afresh after the retry"


def test_the_cache_is_dropped_by_the_command(admin_client):
    job = JobFactory(status="abandoned")
    assert notices(admin_client.get("/admin/")) == 1
    call_command("jobs", "discard", str(job.pk), stdout=None)
    assert notices(admin_client.get("/admin/")) == 0


def test_a_system_check_warns_when_the_middleware_is_missing(settings):
    assert check_middleware() == []
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.startswith("jobqueue.")]
    [warning] = check_middleware()
    assert warning.id == "jobqueue.W003" and warning.level == checks.WARNING
