"""One group, one limit: two tasks declaring a group with different limits fail the system
check jobqueue.E007, naming the group and the tasks."""

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from jobqueue import Concurrency, RateLimit, task
from jobqueue.tasks import base as registry


@pytest.fixture(autouse=True)
def registered_tasks_are_forgotten():
    """The tasks a test registers leave the registry with it: a conflict left behind
    would fail every later ``manage.py check``."""
    before = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(before)


def refund(account_id, charge=""):
    return None


def capture(account, amount=0):
    return None


def limit_errors():
    return [m for m in checks.run_checks() if m.id == "jobqueue.E007"]


def test_the_test_project_declares_each_group_once():
    # tests/testapp/tasks.py shares "stripe" between refund and charge, with one limit.
    assert limit_errors() == []


def test_two_concurrency_limits_in_one_group_are_an_error_naming_both_tasks():
    task(refund, name="billing.refund", concurrency=Concurrency(key="account_id", group="pay"))
    task(
        capture,
        name="billing.capture",
        concurrency=Concurrency(key="account", limit=2, group="pay"),
    )
    [error] = limit_errors()
    assert isinstance(error, checks.Error)
    assert error.msg == (
        'Concurrency group "pay" is declared with 2 different limits: limit=2 by '
        "billing.capture; limit=1 by billing.refund. Its jobs share one count, so each would "
        "be held to its own task's limit."
    )
    assert error.hint == (
        "Give every task of the group the same Concurrency, or give them different groups."
    )


@pytest.mark.parametrize(
    ("first", "second", "shown"),
    [
        ({"limit": 10}, {"limit": 20}, "limit=20, per=1.0, burst=0"),
        ({"limit": 10, "per": 1}, {"limit": 10, "per": 60}, "limit=10, per=60.0, burst=0"),
        ({"limit": 10}, {"limit": 10, "burst": 5}, "limit=10, per=1.0, burst=5"),
    ],
)
def test_two_rate_limits_in_one_group_are_an_error(first, second, shown):
    task(
        refund, name="billing.refund", rate_limit=RateLimit(key="account_id", group="api", **first)
    )
    task(
        capture, name="billing.capture", rate_limit=RateLimit(key="account", group="api", **second)
    )
    [error] = limit_errors()
    assert error.msg.startswith('RateLimit group "api" is declared with 2 different limits: ')
    assert f"{shown} by billing.capture" in error.msg
    assert "by billing.refund" in error.msg


def test_the_same_limit_with_other_keys_or_an_int_per_is_one_declaration():
    # Keys may name different parameters: their values share the group's limit.
    task(
        refund,
        name="billing.refund",
        rate_limit=RateLimit(key="account_id", limit=5, per=1, group="api"),
    )
    task(
        capture,
        name="billing.capture",
        rate_limit=RateLimit(key="account", limit=5, per=1.0, group="api"),
    )
    assert limit_errors() == []


def test_a_concurrency_and_a_rate_limit_of_one_group_are_separate_limits():
    task(
        refund,
        name="billing.refund",
        concurrency=Concurrency(key="account_id", limit=1, group="stripe"),
        rate_limit=RateLimit(key="account_id", limit=25, group="stripe"),
    )
    assert limit_errors() == []


def test_a_group_named_after_a_task_meets_that_tasks_own_limit():
    task(refund, name="billing.refund", concurrency=Concurrency(key="account_id", limit=1))
    task(capture, name="billing.capture", concurrency=Concurrency(limit=3, group="billing.refund"))
    [error] = limit_errors()
    assert 'group "billing.refund"' in error.msg
    assert "limit=1 by billing.refund" in error.msg and "limit=3 by billing.capture" in error.msg


@pytest.mark.django_db
def test_manage_py_check_fails_on_the_conflict():
    task(refund, name="billing.refund", concurrency=Concurrency(limit=1, group="pay"))
    task(capture, name="billing.capture", concurrency=Concurrency(limit=2, group="pay"))
    with pytest.raises(SystemCheckError, match=r'\(jobqueue\.E007\) Concurrency group "pay"'):
        call_command("check")
