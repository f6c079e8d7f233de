"""The examples of Django's tasks documentation, unchanged, run by a real worker process."""

import datetime as dt

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from asgiref.sync import async_to_sync
from django.tasks import TaskResultStatus, default_task_backend
from django.utils import timezone

from jobqueue.models import Job
from tests.conftest import wait_for
from tests.testapp.django_tasks import (
    async_add,
    email_users,
    email_users_in_emails_queue,
    email_users_with_context,
    fails_once,
    record_label,
)
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

FAST = {"POLL_INTERVAL": 0.1}


def finished(result, timeout=30):
    def done():
        result.refresh()
        return result.is_finished

    wait_for(done, timeout=timeout, message=f"task result {result.id} to finish")
    return result


def test_define_enqueue_and_get_the_result(start_worker):
    result = email_users.enqueue(
        emails=["user@example.com"], subject="You have a message", message="Hello there!"
    )
    assert result.status == TaskResultStatus.READY
    worker = start_worker(settings=FAST)
    finished(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 1  # send_mail's count of messages sent
    fetched = email_users.get_result(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL and fetched.return_value == 1
    assert default_task_backend.get_result(result.id).id == result.id
    assert fetched.attempts == 1 and f":{worker.pid}:" in fetched.worker_ids[0]
    assert fetched.enqueued_at <= fetched.started_at <= fetched.finished_at
    assert fetched.kwargs == {
        "emails": ["user@example.com"],
        "subject": "You have a message",
        "message": "Hello there!",
    }


def test_using_changes_priority_and_queue(start_worker):
    low = record_label.enqueue("low")
    high = record_label.using(priority=10).enqueue("high")
    emails = email_users_in_emails_queue.enqueue(["a@example.com"], "Hi", "Hello")
    moved = email_users.using(priority=-5, queue_name="emails").enqueue(
        ["b@example.com"], "Hi", "x"
    )
    rows = Job.objects.in_bulk([int(r.id) for r in (low, high, emails, moved)])
    assert (rows[int(high.id)].priority, rows[int(high.id)].queue) == (10, "default")
    assert (rows[int(emails.id)].priority, rows[int(emails.id)].queue) == (2, "emails")
    assert (rows[int(moved.id)].priority, rows[int(moved.id)].queue) == (-5, "emails")

    # One slot and one queue: the higher priority runs first, the other queue not at all.
    start_worker("--queue", "default", "--concurrency", "1", settings=FAST)
    finished(low)
    assert list(Execution.objects.values_list("label", flat=True)) == ["high", "low"]
    assert email_users.get_result(moved.id).status == TaskResultStatus.READY
    start_worker("--queue", "emails", settings=FAST)
    assert finished(moved).return_value == 1
    assert finished(emails).return_value == 1


def test_defer_with_run_after(start_worker):
    run_after = timezone.now() + dt.timedelta(seconds=3)
    result = record_label.using(run_after=run_after).enqueue("deferred")
    start_worker(settings=FAST)
    wait_for(lambda: Job.objects.filter(task_name__endswith="record_label").exists())
    assert record_label.get_result(result.id).status == TaskResultStatus.READY
    finished(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.started_at >= run_after


def test_async_task_aenqueue_and_aget_result(start_worker):
    start_worker(settings=FAST)

    async def main():
        result = await async_add.aenqueue(2, 3)
        fetched = await async_add.aget_result(result.id)
        while not fetched.is_finished:
            await fetched.arefresh()
        return fetched

    result = async_to_sync(main)()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5


def test_takes_context_gets_djangos_task_context(start_worker):
    result = email_users_with_context.enqueue(["user@example.com"], "Subject", "Message")
    retried = fails_once.enqueue()
    start_worker(settings=FAST)
    assert finished(result).return_value == 1
    execution = Execution.objects.get(job_id=int(result.id))
    assert execution.label == f"attempt 1 of result {result.id}" and execution.attempt == 1

    # A retry is the next attempt, with the failure in errors.
    assert finished(retried).return_value == 2
    assert list(
        Execution.objects.filter(label="dj_fails_once").values_list("attempt", flat=True)
    ) == [1, 2]
    assert retried.attempts == 2 and retried.errors[0].exception_class is ConnectionError
