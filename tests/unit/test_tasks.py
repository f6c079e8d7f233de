"""@task: options validated at import time, names, discovery and the queue selection."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobqueue import conf, task
from jobqueue.console.health import serves
from jobqueue.runtime import queues
from jobqueue.runtime.queues import QueueSelection
from jobqueue.tasks import base as registry
from jobqueue.tasks.options import validate_options


def test_default_name_is_the_dotted_path_and_name_overrides():
    from tests.testapp import tasks

    assert tasks.add.name == "tests.testapp.tasks.add"
    assert tasks.echo.name == "tests.echo"
    assert registry.get("tests.echo") is tasks.echo


def test_effective_options_fall_back_to_settings(settings):
    t = task(lambda: None, name="t.defaults")
    settings.JOBQUEUE = {"MAX_ATTEMPTS": 7, "TIMEOUT": 0, "ON_CRASH": "park"}
    assert (t.max_attempts, t.timeout, t.on_crash) == (7, 0, "park")
    t2 = task(lambda: None, name="t.own", max_attempts=2, timeout=5, on_crash="retry")
    assert (t2.max_attempts, t2.timeout, t2.on_crash) == (2, 5, "retry")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"priority": 500}, "priority must be from -100 to 100"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"timeout": -1}, "timeout"),
        ({"on_crash": "never"}, 'on_crash of t.bad must be "retry" or "park"'),
        ({"backoff": (1, 2)}, "backoff"),
        ({"queue": ""}, "queue"),
    ],
)
def test_bad_task_options_fail_at_decoration(options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        task(lambda: None, name="t.bad", **options)


def test_takes_context_needs_a_context_parameter():
    with pytest.raises(TypeError, match="first parameter must be the context"):
        task(lambda: None, name="t.noctx", takes_context=True)


def test_two_functions_cannot_share_a_name():
    def one():
        pass

    def two():
        pass

    task(one, name="t.same")
    with pytest.raises(ImproperlyConfigured, match="Two tasks are named 't.same'"):
        task(two, name="t.same")


def test_discovery_imports_installed_apps_and_task_modules(settings):
    names = registry.discover()
    assert "shop.tasks.send_order_confirmation" in names
    assert "tests.testapp.tasks.add" in names
    settings.JOBQUEUE = {"TASK_MODULES": ["tests.no_such_module"]}
    with pytest.raises(ImproperlyConfigured, match="tests.no_such_module"):
        registry.discover()


def test_queue_selection_for_pools_routing_and_options():
    s = conf.build(
        {
            "POOLS": {"fast": {"queues": ["emails"]}, "slow": {"queues": "*"}},
            "ROUTING": {"webhooks": "fast", "reports": "slow"},
        }
    )
    assert queues.select(s, s.pools["fast"]) == (("emails", "webhooks"), ())
    # The catch-all leaves the fast pool's queues alone.
    assert queues.select(s, s.pools["slow"]) == (None, ("emails", "webhooks"))
    # --queue serves that queue even if another pool owns it; --exclude-queue adds.
    assert queues.select(s, s.pools["slow"], only=["emails"]) == (("emails",), ())
    assert queues.select(s, s.pools["slow"], exclude=["reports"]) == (
        None,
        ("emails", "reports", "webhooks"),
    )
    assert s.pool_for("anything") == s.pools["slow"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max_attempts": 0},
            "here: max_attempts must be a whole number from 1 to 2,147,483,647, not 0",
        ),
        (
            {"max_attempts": 2**31},
            "here: max_attempts must be a whole number from 1 to 2,147,483,647",
        ),
        ({"timeout": None}, "here: timeout must be a number of seconds, not None"),
        ({"on_crash": "never"}, 'here: on_crash must be "retry" or "park"'),
        ({"backoff": (1, 0.5, 2)}, r"here: backoff must be a \(first, factor, cap\) tuple"),
    ],
)
def test_validate_options_is_the_one_rule_and_raises_value_error(options, message):
    with pytest.raises(ValueError, match=message):
        validate_options(options, where="here: {}".format)


def test_validate_options_returns_the_checked_values():
    checked = validate_options(
        {"max_attempts": 2, "timeout": 5, "on_crash": "park", "backoff": [1, 2, 3]},
        where="{}".format,
    )
    assert checked == {"max_attempts": 2, "timeout": 5.0, "on_crash": "park", "backoff": (1, 2, 3)}
    assert type(checked["backoff"][0]) is float
    with pytest.raises(TypeError, match="'queue' is not one of max_attempts"):
        validate_options({"queue": "x"}, where="{}".format)


def test_a_queue_selection_answers_for_the_worker_the_probe_and_the_tables():
    every = QueueSelection(None, ("reports",))
    some = QueueSelection(("emails", "webhooks"))
    assert every.serves("emails") and not every.serves("reports")
    assert some.serves("emails") and not some.serves("reports")
    assert QueueSelection.from_row(some.as_row()) == some
    assert QueueSelection.from_row({"queues": None, "excluded": ["reports"]}) == every
    assert QueueSelection.from_row("hand-written") is None
    assert every.describe() == "* except reports"
    assert some.describe(sep=", ") == "emails, webhooks"
    assert QueueSelection(()).describe(every="every queue", none="no queue") == "no queue"
    assert serves({"queues": ["emails"], "excluded": []}, "emails")
    assert not serves(None, "emails")
