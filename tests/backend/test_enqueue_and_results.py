"""The backend's enqueue side and results, against the real test database (no worker)."""

import datetime as dt

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone

from jobqueue.backend import JobQueueBackend
from jobqueue.models import Job
from jobqueue.testing import run_jobs
from tests.testapp import django_tasks, tasks

pytestmark = pytest.mark.django_db
needs_task_options = pytest.mark.skipif(
    not django_tasks.OPTIONS_SUPPORTED, reason="Django 6.1 hands @task options to the backend"
)


def test_the_backend_declares_every_capability():
    backend = task_backends["default"]
    assert isinstance(backend, JobQueueBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_enqueue_writes_a_job_through_the_same_path_as_jobqueue_task():
    result = django_tasks.add.using(priority=7, queue_name="emails").enqueue(2, b=3)
    row = Job.objects.get(pk=int(result.id))
    assert (row.task_name, row.args, row.kwargs) == (
        "tests.testapp.django_tasks.add",
        [2],
        {"b": 3},
    )
    assert (row.queue, row.priority, row.status, row.max_attempts) == ("emails", 7, "pending", 3)
    assert result.status == TaskResultStatus.READY
    assert result.enqueued_at == row.enqueued_at and result.worker_ids == []
    # The same row shape as the jobqueue API, column for column.
    native = tasks.add.using(priority=7, queue="emails").enqueue(2, b=3)
    native_row = Job.objects.values().get(pk=native.pk)
    django_row = Job.objects.values().get(pk=row.pk)
    ignored = {"id", "task_name", "run_at", "enqueued_at", "updated_at"}
    assert {k: v for k, v in native_row.items() if k not in ignored} == {
        k: v for k, v in django_row.items() if k not in ignored
    }


def test_get_result_maps_every_status():
    result = django_tasks.add.enqueue(1, 2)
    mapping = {
        "pending": TaskResultStatus.READY,
        "running": TaskResultStatus.RUNNING,
        "succeeded": TaskResultStatus.SUCCESSFUL,
        "failed": TaskResultStatus.FAILED,
        "abandoned": TaskResultStatus.FAILED,
        "discarded": TaskResultStatus.FAILED,
    }
    for status, expected in mapping.items():
        Job.objects.filter(pk=int(result.id)).update(status=status, started_at=timezone.now())
        assert default_task_backend.get_result(result.id).status == expected
    # Claimed ahead of a worker's slots and not started yet: still waiting, for Django.
    Job.objects.filter(pk=int(result.id)).update(status="running", started_at=None, worker="w")
    held = default_task_backend.get_result(result.id)
    assert (held.status, held.started_at, held.worker_ids) == (TaskResultStatus.READY, None, [])


def test_unknown_or_malformed_ids_do_not_exist():
    for result_id in ("999999", "not-a-number", ""):
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(result_id)


def test_a_jobqueue_task_job_is_not_a_django_task_result():
    job = tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultDoesNotExist, match="not a django.tasks task"):
        default_task_backend.get_result(str(job.pk))


def test_rolled_back_enqueue_leaves_no_result_to_fetch():
    with pytest.raises(RuntimeError), transaction.atomic():
        result = django_tasks.add.enqueue(1, 2)
        assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY
        raise RuntimeError("roll back")
    with pytest.raises(TaskResultDoesNotExist):
        django_tasks.add.get_result(result.id)
    assert not Job.objects.exists()


@needs_task_options
def test_results_of_a_run_carry_errors_workers_and_return_value():
    result = django_tasks.fails_once.enqueue()
    run_jobs()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 2
    assert len(result.worker_ids) == result.attempts == 2
    [error] = result.errors
    assert error.exception_class is ConnectionError and "first try fails" in error.traceback
    assert result.started_at and result.finished_at and result.last_attempted_at

    failed = django_tasks.always_fails.enqueue()
    run_jobs()
    failed.refresh()
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 2
    assert [e.exception_class for e in failed.errors] == [ValueError, ValueError]
    with pytest.raises(ValueError, match="Task failed"):
        _ = failed.return_value


def test_django_signals_are_sent_at_enqueue_start_and_finish():
    seen = []

    def receiver(signal_name):
        def on(sender, task_result, **kwargs):
            seen.append((signal_name, sender, task_result.status, task_result.attempts))

        return on

    receivers = {name: receiver(name) for name in ("enqueued", "started", "finished")}
    task_enqueued.connect(receivers["enqueued"])
    task_started.connect(receivers["started"])
    task_finished.connect(receivers["finished"])
    try:
        django_tasks.fails_once.enqueue()
        run_jobs()
    finally:
        task_enqueued.disconnect(receivers["enqueued"])
        task_started.disconnect(receivers["started"])
        task_finished.disconnect(receivers["finished"])
    assert seen == [
        ("enqueued", JobQueueBackend, TaskResultStatus.READY, 0),
        ("started", JobQueueBackend, TaskResultStatus.RUNNING, 1),
        ("started", JobQueueBackend, TaskResultStatus.RUNNING, 2),
        # Sent once, for the final outcome: the first attempt's retry is not an end.
        ("finished", JobQueueBackend, TaskResultStatus.SUCCESSFUL, 2),
    ]


@needs_task_options
def test_task_class_options_reach_the_row_and_the_worker():
    from jobqueue.tasks import base as registry

    result = django_tasks.fails_once.enqueue()
    assert Job.objects.get(pk=int(result.id)).max_attempts == 3
    adapter = registry.get(django_tasks.fails_once.module_path)
    assert adapter.backoff == (0.2, 1.0, 0.2) and adapter.max_attempts == 3


def test_run_after_is_stored_as_run_at():
    when = timezone.now() + dt.timedelta(hours=1)
    result = django_tasks.add.using(run_after=when).enqueue(1, 2)
    assert Job.objects.get(pk=int(result.id)).run_at == when


@pytest.mark.parametrize("hours", [1, -1])
def test_get_result_returns_the_task_with_its_run_after(hours):
    from asgiref.sync import async_to_sync

    when = timezone.now() + dt.timedelta(hours=hours)
    later = django_tasks.add.using(run_after=when).enqueue(1, 2)
    now = django_tasks.add.enqueue(3, 4)
    assert later.task.run_after == when and now.task.run_after is None
    backend = task_backends["default"]
    assert backend.get_result(later.id).task.run_after == when
    assert django_tasks.add.get_result(later.id).task.run_after == when
    assert async_to_sync(backend.aget_result)(later.id).task.run_after == when
    # As Django's own backends: a task enqueued without run_after has none.
    assert backend.get_result(now.id).task.run_after is None
    fetched = backend.get_result(later.id).task
    assert (fetched.func, fetched.queue_name, fetched.priority) == (
        django_tasks.add.func,
        "default",
        0,
    )


def test_aenqueue_and_aget_result():
    from asgiref.sync import async_to_sync

    async def main():
        result = await django_tasks.async_add.aenqueue(2, 3)
        fetched = await django_tasks.async_add.aget_result(result.id)
        return result, fetched

    result, fetched = async_to_sync(main)()
    assert fetched.id == result.id and fetched.status == TaskResultStatus.READY
    assert fetched.args == [2, 3]


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: django_tasks.add.using(priority=101), InvalidTask, "priority must be"),
        (lambda: django_tasks.add.using(priority=-101), InvalidTask, "priority must be"),
        (
            lambda: django_tasks.add.using(run_after=dt.datetime(2030, 1, 1)),
            InvalidTask,
            "run_after must be an aware datetime",
        ),
        (
            lambda: django_tasks.add.using(queue_name="nowhere"),
            InvalidTask,
            "Queue 'nowhere' is not valid for backend 'default'",
        ),
        (
            lambda: django_tasks.add.using(run_after=timezone.now() + dt.timedelta(days=4000)),
            InvalidTask,
            r"add: run_after 20\d\d-.* is more than 315,360,000 seconds \(conf.MAX_DELAY",
        ),
    ],
)
def test_invalid_uses_fail_with_djangos_exceptions(make, error, message):
    with pytest.raises(error, match=message):
        make().enqueue(1, 2)
    assert not Job.objects.exists()


def test_non_json_arguments_fail_at_enqueue_naming_the_argument():
    with pytest.raises(TypeError, match=r"argument 'b' is not JSON-serialisable"):
        django_tasks.add.enqueue(1, b=object())
    with pytest.raises(ValueError, match=r"add: argument 'b' cannot be stored: .* NUL byte"):
        django_tasks.add.enqueue(1, b="\x00")
    with pytest.raises(TypeError, match=r"add: missing a required argument: 'b'"):
        django_tasks.add.enqueue(1)
    assert not Job.objects.exists()


@needs_task_options
def test_bad_per_task_options_are_invalid_tasks():
    from django.tasks import task

    def handler():
        pass

    with pytest.raises(InvalidTask, match="on_crash"):
        task(on_crash="sometimes")(handler)
    with pytest.raises(InvalidTask, match="max_attempts"):
        task(max_attempts=0)(handler)
