"""Retry all failed jobs of a queue or of a task, from the Queues page: one POST, one
statement, Retry's guards and words."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobqueue.models import Job
from tests.factories import FinishedJobFactory, JobFactory

pytestmark = pytest.mark.django_db

PAGE = "/admin/jobqueue/queuesummary/"
URL = "/admin/jobqueue/queuesummary/retry-failed/"
WRITE = re.compile(r"\bUPDATE\s+jobqueue_job\b", re.IGNORECASE)


def statuses(jobs):
    return [Job.objects.get(pk=j.pk).status for j in jobs]


def messages_of(response):
    # Without the abandoned-jobs notice, which any page with an abandoned job shows.
    return [str(m) for m in response.context["messages"] if "abandoned:" not in str(m)]


def test_each_queue_with_failed_jobs_offers_retry_n_failed(operator):
    JobFactory.create_batch(3, queue="feeds", status="failed")
    JobFactory(queue="emails")
    html = operator.get(PAGE).content.decode()
    assert 'name="queue" value="feeds"' in html and "Retry 3 failed" in html
    assert 'name="queue" value="emails"' not in html  # nothing to retry there


def test_a_viewer_sees_no_button_and_may_not_post(viewer):
    job = JobFactory(queue="feeds", status="failed")
    html = viewer.get(PAGE).content.decode()
    assert "Retry 1 failed" not in html and "jobqueue-retry-failed" not in html
    assert viewer.post(URL, {"queue": "feeds"}).status_code == 403
    assert statuses([job]) == ["failed"]


def test_a_get_is_refused(operator):
    assert operator.get(URL).status_code == 405


def test_retries_exactly_the_failed_jobs_of_the_queue_in_one_statement(operator):
    failed = JobFactory.create_batch(2, queue="feeds", status="failed")
    others = [
        JobFactory(queue="feeds", status="abandoned"),
        JobFactory(queue="feeds", status="discarded"),
        JobFactory(queue="feeds"),
        FinishedJobFactory(queue="feeds"),
        JobFactory(queue="emails", status="failed"),
    ]
    with CaptureQueriesContext(connection) as queries:
        response = operator.post(URL, {"queue": "feeds"}, follow=True)
    assert response.redirect_chain[-1][0] == PAGE
    assert messages_of(response) == ['Queue "feeds": Retried 2 jobs.']
    assert statuses(failed) == ["pending", "pending"]
    assert statuses(others) == ["abandoned", "discarded", "pending", "succeeded", "failed"]
    assert Job.objects.get(pk=failed[0].pk).attempts == 0  # Retry's fresh budget
    assert len([q for q in queries if WRITE.search(q["sql"])]) == 1


def test_a_key_held_by_a_newer_unfinished_job_is_refused_as_retry_refuses_it(operator):
    held = JobFactory(queue="feeds", status="failed", idempotency_key="feed:9")
    JobFactory(queue="feeds", idempotency_key="feed:9")  # the newer, unfinished copy
    free = JobFactory(queue="feeds", status="failed")
    response = operator.post(URL, {"queue": "feeds"}, follow=True)
    assert messages_of(response) == [
        'Queue "feeds": Retried 1 job, skipped 1 job because a newer unfinished job holds '
        "its idempotency key."
    ]
    assert statuses([held, free]) == ["failed", "pending"]


def test_a_job_no_longer_failed_when_pressed_is_left_alone(operator):
    job = JobFactory(queue="feeds", status="failed")
    operator.get(PAGE)  # the page showed "Retry 1 failed"...
    Job.objects.filter(pk=job.pk).update(status="discarded")  # ...then someone discarded it
    response = operator.post(URL, {"queue": "feeds"}, follow=True)
    assert messages_of(response) == ['Queue "feeds": Retried 0 jobs.']
    assert statuses([job]) == ["discarded"]


def test_per_task_table_and_retry_across_queues(operator):
    welcome = [
        JobFactory(task_name="shop.tasks.send_welcome", queue=queue, status="failed")
        for queue in ("emails", "bulk")
    ]
    other = JobFactory(task_name="shop.tasks.other", queue="emails", status="failed")
    html = operator.get(PAGE).content.decode()
    table = html[html.index("jobqueue-failed-tasks") :]
    assert table.index("shop.tasks.send_welcome") < table.index("shop.tasks.other")  # most first
    assert 'name="task" value="shop.tasks.send_welcome"' in table and "Retry 2 failed" in table
    assert "status__exact=failed&amp;task_name=shop.tasks.send_welcome" in table
    response = operator.post(URL, {"task": "shop.tasks.send_welcome"}, follow=True)
    assert messages_of(response) == ['Task "shop.tasks.send_welcome": Retried 2 jobs.']
    assert statuses(welcome) == ["pending", "pending"]
    assert statuses([other]) == ["failed"]


def test_no_table_without_failed_jobs(operator):
    JobFactory(status="abandoned")
    assert "jobqueue-failed-tasks" not in operator.get(PAGE).content.decode()


@pytest.mark.parametrize("data", [{}, {"queue": "a", "task": "b"}])
def test_one_queue_or_one_task_is_required(operator, data):
    job = JobFactory(queue="a", status="failed", task_name="b")
    response = operator.post(URL, data, follow=True)
    assert messages_of(response) == ["Say which queue or which task to retry."]
    assert statuses([job]) == ["failed"]
