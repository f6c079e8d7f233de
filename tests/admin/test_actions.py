"""The changelist actions `retry` and `discard`: permissions, guards, messages, one statement."""

import datetime as dt
import re

import pytest
from django.contrib.admin import helpers
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.store.channel import NOTIFY_CHANNEL
from tests.conftest import listen_for_jobs, notifications
from tests.factories import FinishedJobFactory, JobFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db

URL = "/admin/jobqueue/job/"
WRITE = re.compile(r"\bUPDATE\s+jobqueue_job\b", re.IGNORECASE)


def act(client, action, jobs=(), *, query="", select_across=False, confirm=False):
    """Post the action as the changelist does; ``confirm``: as the Discard confirmation's
    Confirm does (``post=yes``)."""
    data = {"action": action, "index": "0", helpers.ACTION_CHECKBOX_NAME: [j.pk for j in jobs]}
    if confirm:
        data["post"] = "yes"
    if select_across:
        # "Select all N": the page's boxes are ticked too, and the filter is what counts.
        data["select_across"] = "1"
        data[helpers.ACTION_CHECKBOX_NAME] = [Job.objects.values_list("pk", flat=True)[0]]
    response = client.post(f"{URL}{query}", data, follow=True)
    assert response.status_code == 200
    return response, [str(m) for m in response.context["messages"]]


def updates(queries):
    return [q["sql"] for q in queries if WRITE.search(q["sql"])]


def statuses(jobs):
    return [Job.objects.get(pk=j.pk).status for j in jobs]


def test_retry_action(operator):
    jobs = [JobFactory(status="failed", attempts=3), JobFactory(status="abandoned", crashes=3)]
    _, messages = act(operator, "retry", jobs)
    assert "Retried 2 jobs." in messages
    assert statuses(jobs) == ["pending", "pending"]
    assert {(j.attempts, j.crashes) for j in Job.objects.all()} == {(0, 0)}


def test_retry_reports_what_it_skipped_and_why(operator):
    jobs = [JobFactory(status="failed"), FinishedJobFactory(), JobFactory(status="running")]
    _, messages = act(operator, "retry", jobs)
    assert (
        "Retried 1 job, skipped 2 jobs: 1 because it is running, 1 because it succeeded."
        in messages
    )


def test_retry_refused_while_a_newer_unfinished_job_holds_the_key(operator):
    old = JobFactory(status="failed", idempotency_key="order:5")
    newer = tasks.add.using(idempotency_key="order:5").enqueue(2, 2)
    _, messages = act(operator, "retry", [old])
    assert messages == [
        "Retried 0 jobs, skipped 1 job because a newer unfinished job holds its idempotency key."
    ]
    assert statuses([old, newer]) == ["failed", "pending"]


@pytest.mark.django_db(transaction=True)
def test_the_retry_action_wakes_the_workers_of_the_jobs_queue(postgresql_only, operator):
    job = JobFactory(status="failed", attempts=3, queue="emails")
    listener = listen_for_jobs()
    try:
        _, messages = act(operator, "retry", [job])
        assert "Retried 1 job." in messages
        # Sent by the retry statement, delivered by PostgreSQL at its commit.
        assert notifications(listener) == [(NOTIFY_CHANNEL, "emails")]
    finally:
        listener.close()


def test_race_a_lease_renewed_after_the_page_was_loaded_wins(operator):
    """The operator opens the abandoned jobs and ticks one; before the click, the job's lease
    is renewed (its worker was alive after all). The retry reads nothing from the page: the
    UPDATE's own WHERE sees the fresh lease and leaves the job alone."""
    job = JobFactory(status="abandoned", lease_until=timezone.now() - dt.timedelta(seconds=1))
    page = operator.get(URL, {"status__exact": "abandoned"})
    assert [j.pk for j in page.context["cl"].result_list] == [job.pk]
    Job.objects.filter(pk=job.pk).update(lease_until=timezone.now() + dt.timedelta(minutes=5))
    _, messages = act(operator, "retry", [job], query="?status__exact=abandoned")
    assert (
        "Retried 0 jobs, skipped 1 job because its lease is still held, so its worker may "
        "still be running it."
    ) in messages
    assert Job.objects.get(pk=job.pk).status == "abandoned"


def test_discard_action(operator):
    lease = timezone.now() + dt.timedelta(minutes=5)
    running = JobFactory(status="running", token="t" * 32, worker="w", lease_until=lease)
    jobs = [JobFactory(), running, FinishedJobFactory()]
    _, messages = act(operator, "discard", jobs, confirm=True)
    assert messages == [
        "Discarded 2 jobs (1 was running: its worker's writes are refused from now on), "
        "skipped 1 job because it succeeded."
    ]
    assert statuses(jobs) == ["discarded", "discarded", "succeeded"]
    assert Job.objects.get(pk=jobs[1].pk).token is None


def test_select_all_hands_the_filter_to_one_statement(operator):
    Job.objects.bulk_create(
        [Job(task_name="t", queue="feeds", status="failed") for _ in range(10_000)]
        + [Job(task_name="t", queue="emails", status="failed") for _ in range(5)]
    )
    with CaptureQueriesContext(connection) as queries:
        _, messages = act(
            operator, "retry", query="?queue=feeds&status__exact=failed", select_across=True
        )
    assert messages == ["Retried 10000 jobs."]
    [write] = updates(queries)
    if connection.vendor == "mysql":
        # MySQL's write is a pair: the locking read selects by the filter, the UPDATE
        # writes the rows it locked (jobqueue/sql/mysql.sql).
        [write] = [q["sql"] for q in queries if "FOR UPDATE" in q["sql"]]
    assert "feeds" in write  # the changelist's filter, compiled into the statement
    assert Job.objects.filter(queue="emails", status="failed").count() == 5
    with CaptureQueriesContext(connection) as queries:
        _, messages = act(
            operator, "discard", query="?queue=feeds", select_across=True, confirm=True
        )
    assert messages == ["Discarded 10000 jobs."]
    assert len(updates(queries)) == 1


def test_ten_thousand_ticked_ids_are_one_statement(operator, settings):
    # Django refuses a form with more than 1,000 fields unless told otherwise.
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 20_000
    Job.objects.bulk_create([Job(task_name="t", status="failed") for _ in range(10_000)])
    jobs = list(Job.objects.all())
    with CaptureQueriesContext(connection) as queries:
        _, messages = act(operator, "retry", jobs)
    assert messages == ["Retried 10000 jobs."]
    assert len(updates(queries)) == 1


@pytest.mark.parametrize("action", ["retry", "discard"])
def test_actions_need_change_permission(viewer, action):
    job = JobFactory(status="failed")
    assert viewer.get(URL).context["action_form"] is None  # no actions offered
    _, messages = act(viewer, action, [job], confirm=True)
    assert not any(m.startswith(("Retried", "Discarded")) for m in messages)
    assert statuses([job]) == ["failed"]


def confirmation_form(response):
    """What the confirmation page's Confirm posts, read from the page."""
    html = response.content.decode()
    action = re.search(r'<form method="post" action="([^"]*)"', html).group(1)
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', html)
    data = {}
    for name, value in fields:
        if name != "csrfmiddlewaretoken":
            data.setdefault(name, []).append(value)
    return action.replace("&amp;", "&"), data


def test_discard_asks_first_listing_the_jobs_and_saying_which_run(operator):
    lease = timezone.now() + dt.timedelta(minutes=5)
    running = JobFactory(status="running", token="t" * 32, worker="w", lease_until=lease)
    pending = JobFactory(task_name="shop.tasks.send_welcome")
    response, messages = act(operator, "discard", [running, pending])
    html = response.content.decode()
    assert messages == []
    assert statuses([running, pending]) == ["running", "pending"]  # nothing done yet
    assert "<title>Discard jobs |" in html
    assert "Discard these 2 jobs?" in html
    assert "1 of them is running: it is cancelled" in html
    assert f'href="/admin/jobqueue/job/{pending.pk}/change/">#{pending.pk}</a>' in html
    assert "shop.tasks.send_welcome" in html
    assert 'class="button cancel-link"' in html and "delete-confirmation" in html
    action, data = confirmation_form(response)
    assert action == URL
    response = operator.post(action, data, follow=True)
    [message] = [str(m) for m in response.context["messages"]]
    assert message.startswith("Discarded 2 jobs (1 was running")
    assert statuses([running, pending]) == ["discarded", "discarded"]


def test_the_confirmation_of_select_all_keeps_the_filter(operator):
    feeds = JobFactory.create_batch(3, queue="feeds", status="failed")
    other = JobFactory(queue="emails", status="failed")
    response, _ = act(operator, "discard", query="?queue=feeds", select_across=True)
    assert "Discard these 3 jobs?" in response.content.decode()
    action, data = confirmation_form(response)
    assert action == f"{URL}?queue=feeds" and data["select_across"] == ["1"]
    operator.post(action, data)
    assert statuses(feeds) == ["discarded"] * 3
    assert statuses([other]) == ["failed"]


def test_the_confirmation_lists_a_hundred_and_counts_the_rest(operator):
    Job.objects.bulk_create([Job(task_name="t", status="failed") for _ in range(105)])
    response, _ = act(operator, "discard", select_across=True)
    html = response.content.decode()
    assert "Discard these 105 jobs?" in html and "and 5 more jobs" in html
    assert len(re.findall(r'href="/admin/jobqueue/job/\d+/change/"', html)) == 100


def test_retry_stays_one_click(operator):
    job = JobFactory(status="failed")
    _, messages = act(operator, "retry", [job])
    assert messages == ["Retried 1 job."]
