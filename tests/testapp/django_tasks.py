"""django.tasks tasks the backend tests enqueue, written as Django's own documentation does.

Imported by ``tests/testapp/tasks.py`` on Django 6, so a worker's discovery registers them.
"""

import os
import signal

import django
from django.core.mail import send_mail
from django.tasks import task

from tests.testapp.models import Execution
from tests.testapp.tasks import wait_for_file

# Django 6.0's @task takes no backend options; tests that need them skip there.
OPTIONS_SUPPORTED = django.VERSION >= (6, 1)


def options(**given):
    return given if OPTIONS_SUPPORTED else {}


def record(label, context=None):
    Execution.objects.create(
        label=label,
        job_id=int(context.task_result.id) if context else None,
        attempt=context.attempt if context else None,
        pid=os.getpid(),
    )


# "Defining tasks" in Django's documentation, unchanged.
@task
def email_users(emails, subject, message):
    return send_mail(subject=subject, message=message, from_email=None, recipient_list=emails)


@task(priority=2, queue_name="emails")
def email_users_in_emails_queue(emails, subject, message):
    return send_mail(subject=subject, message=message, from_email=None, recipient_list=emails)


# "Task context" in Django's documentation (recording instead of logging).
@task(takes_context=True)
def email_users_with_context(context, emails, subject, message):
    record(f"attempt {context.attempt} of result {context.task_result.id}", context)
    return send_mail(subject=subject, message=message, from_email=None, recipient_list=emails)


@task
async def async_add(a, b):
    return a + b


@task
def add(a, b):
    return a + b


@task
def record_label(label):
    record(label)
    return label


# Django 6.1 hands these options to the backend's task_class (JobQueueTask).
@task(takes_context=True, **options(max_attempts=3, backoff=(0.2, 1, 0.2)))
def fails_once(context):
    record("dj_fails_once", context)
    if context.attempt == 1:
        raise ConnectionError("first try fails")
    return context.attempt


@task(**options(max_attempts=2, backoff=(0.1, 1, 0.1)))
def always_fails():
    raise ValueError("always broken")


@task(takes_context=True)
def block_until(context, path):
    record("dj_block:start", context)
    wait_for_file(path)
    record("dj_block:end", context)
    return f"done by {os.getpid()}"


@task(takes_context=True, **options(on_crash="park"))
def park_block_until(context, path):
    record("dj_park:start", context)
    wait_for_file(path)
    return "never"


@task
def kill_self():
    os.kill(os.getpid(), signal.SIGKILL)


# Django 6.1 hands flow control's options to JobQueueTask too (tests/backend/test_limits.py).
from jobqueue import Concurrency, RateLimit  # noqa: E402


@task(
    takes_context=True,
    **options(
        concurrency=Concurrency(key="tenant", limit=2),
        rate_limit=RateLimit(key="tenant", limit=5, per=1.0, group="dj_tenants"),
    ),
)
def sync_tenant(context, tenant, full=False):
    record(f"dj_sync:{tenant}", context)
    return tenant
