"""The test kit with django.tasks tasks: captured and run like jobqueue.task ones."""

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.tasks import TaskResultStatus

from jobqueue.models import Job
from jobqueue.testing import capture
from tests.testapp import django_tasks

pytestmark = pytest.mark.django_db


def test_capture_records_django_tasks_by_their_module_path():
    with capture() as enqueued:
        result = django_tasks.email_users.using(queue_name="emails", priority=3).enqueue(
            emails=["ada@example.com"], subject="Welcome", message="Hi"
        )
    assert not Job.objects.exists()
    assert result.status == TaskResultStatus.READY and result.id.startswith("unsaved-")
    [item] = enqueued.assert_enqueued(
        django_tasks.email_users, ["ada@example.com"], "Welcome", message="Hi", count=1
    )
    assert (item.task_name, item.queue, item.priority) == (
        "tests.testapp.django_tasks.email_users",
        "emails",
        3,
    )


def test_run_a_captured_django_task_with_the_fixtures(jobqueue_enqueued, jobqueue_run, mailoutbox):
    result = django_tasks.email_users.enqueue(["ada@example.com"], "Welcome", "Hi")
    jobqueue_enqueued.assert_enqueued(django_tasks.email_users, count=1)
    run = jobqueue_run()
    assert run.succeeded == [int(result.id)]
    result.refresh()
    assert result.return_value == 1 and mailoutbox[0].to == ["ada@example.com"]
