"""The backend validates OPTIONS at start-up and reports its setup through check()."""

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.db import connection
from django.tasks.exceptions import InvalidTaskBackend
from django.test import override_settings

from jobqueue.backend import JobQueueBackend
from tests.testapp import django_tasks

BACKEND = "jobqueue.backend.JobQueueBackend"


def backend(**params):
    return JobQueueBackend("jobs", {"BACKEND": BACKEND, **params})


def ids(messages):
    return [message.id for message in messages]


def test_a_correct_backend_has_nothing_to_report():
    assert backend(QUEUES=["default", "emails"]).check() == []


def test_options_set_defaults_for_every_task():
    configured = backend(
        OPTIONS={"MAX_ATTEMPTS": 7, "TIMEOUT": 60, "ON_CRASH": "park", "BACKOFF": (1, 2, 10)}
    )
    assert configured.defaults == {
        "max_attempts": 7,
        "timeout": 60.0,
        "on_crash": "park",
        "backoff": (1.0, 2.0, 10.0),
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"RETRIES": 3}, r"unknown key 'RETRIES'; jobqueue takes MAX_ATTEMPTS, TIMEOUT"),
        ({"MAX_ATTEMPTS": 0}, r'OPTIONS"\]\["MAX_ATTEMPTS"\] must be a whole number'),
        ({"ON_CRASH": "never"}, r'OPTIONS"\]\["ON_CRASH"\] must be "retry" or "park"'),
        ({"TIMEOUT": -1}, r'OPTIONS"\]\["TIMEOUT"\] must be zero or more seconds'),
        ({"BACKOFF": (1, 0.5, 2)}, r'OPTIONS"\]\["BACKOFF"\] must be a \(first, factor, cap\)'),
    ],
)
def test_bad_options_fail_at_start_up_naming_the_key(options, message):
    with pytest.raises(InvalidTaskBackend, match=message):
        backend(OPTIONS=options)


def test_a_queue_no_pool_serves_is_an_error():
    pools = {"POOLS": {"web": {"queues": ["default"]}}, "ROUTING": {"reports": "web"}}
    with override_settings(JOBQUEUE=pools):
        messages = backend(QUEUES=["default", "reports", "emails"]).check()
    assert ids(messages) == ["jobqueue.E103"]
    assert 'TASKS["jobs"]["QUEUES"] has \'emails\'' in messages[0].msg


def test_jobqueue_missing_from_installed_apps_is_an_error(settings):
    settings.INSTALLED_APPS = [app for app in settings.INSTALLED_APPS if app != "jobqueue"]
    messages = backend().check()
    assert ids(messages) == ["jobqueue.E101"]
    assert '"jobqueue" is not in INSTALLED_APPS' in messages[0].msg


def test_an_unsupported_database_is_an_error(monkeypatch):
    monkeypatch.setattr(connection, "vendor", "oracle")
    messages = backend().check()
    assert ids(messages) == ["jobqueue.E102"]
    assert (
        "needs PostgreSQL, MySQL, MariaDB or SQLite; the default database is oracle"
        in messages[0].msg
    )


@pytest.mark.django_db
def test_the_project_checks_run_the_backend_checks():
    from django.core import checks

    with override_settings(
        TASKS={"default": {"BACKEND": BACKEND, "QUEUES": ["default", "emails"]}},
        JOBQUEUE={"POOLS": {"only": {"queues": ["default"]}}},
    ):
        messages = checks.run_checks()
    assert "jobqueue.E103" in ids(messages)


def options_probe(value):
    return value


@pytest.mark.django_db
def test_options_reach_the_row_and_the_worker():
    from django.tasks import task

    from jobqueue.models import Job
    from jobqueue.tasks import base as registry

    options = {"MAX_ATTEMPTS": 9, "TIMEOUT": 5, "ON_CRASH": "park", "BACKOFF": (2, 3, 30)}
    with override_settings(TASKS={"default": {"BACKEND": BACKEND, "OPTIONS": options}}):
        probe = task(options_probe)
        result = probe.enqueue(1)
        adapter = registry.get(probe.module_path)
        assert (adapter.max_attempts, adapter.timeout, adapter.on_crash) == (9, 5.0, "park")
        assert adapter.backoff_delay(2) == 6.0
        row = Job.objects.get(pk=int(result.id))
        assert (row.max_attempts, row.on_crash) == (9, "park")
        if not django_tasks.OPTIONS_SUPPORTED:
            return  # Django 6.0 takes no per-task options
        # A per-task option wins over OPTIONS.
        adapter = registry.get(task(max_attempts=2)(options_probe).module_path)
        assert (adapter.max_attempts, adapter.timeout) == (2, 5.0)
