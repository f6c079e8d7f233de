"""Flow control's declarations: every bad value is refused where it is given, naming it.

A ``Concurrency`` or ``RateLimit`` checks its own values when it is made; ``@task`` checks
its ``key`` against the function's parameters (``ImproperlyConfigured``, at import), and
``.using()`` the same (``TypeError``, at the call). What an enqueue refuses, a key's value,
is in tests/storage/test_limit_refusals.py.
"""

import math

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobqueue import Concurrency, RateLimit, task
from jobqueue.tasks import base as registry


@pytest.fixture(autouse=True)
def registered_tasks_are_forgotten():
    """The tasks a test registers leave the registry with it."""
    before = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(before)


LIMIT = "must be a whole number from 1 to 2,147,483,647"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Concurrency(limit=0), f"Concurrency limit {LIMIT}, not 0"),
        (lambda: Concurrency(limit=-3), f"Concurrency limit {LIMIT}, not -3"),
        (lambda: Concurrency(limit=2.0), f"Concurrency limit {LIMIT}, not 2.0"),
        (lambda: Concurrency(limit="2"), f"Concurrency limit {LIMIT}, not '2'"),
        (lambda: Concurrency(limit=True), f"Concurrency limit {LIMIT}, not True"),
        (lambda: Concurrency(limit=2**31), f"Concurrency limit {LIMIT}, not 2147483648"),
        (lambda: RateLimit(limit=0), f"RateLimit limit {LIMIT}, not 0"),
        (lambda: RateLimit(limit=1.5), f"RateLimit limit {LIMIT}, not 1.5"),
        (lambda: RateLimit(limit=False), f"RateLimit limit {LIMIT}, not False"),
    ],
)
def test_a_limit_is_a_whole_number_from_one(make, message):
    with pytest.raises(ValueError) as raised:
        make()
    assert str(raised.value).startswith(message)


PER = "RateLimit per must be a number of seconds above 0 and at most 315,360,000"


@pytest.mark.parametrize(
    ("per", "shown"),
    [
        (0, "0"),
        (-1.0, "-1.0"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (1e20, "1e+20"),
        (True, "True"),
        ("1", "'1'"),
        (None, "None"),
    ],
)
def test_per_is_a_finite_number_of_seconds_above_zero(per, shown):
    with pytest.raises(ValueError) as raised:
        RateLimit(limit=5, per=per)
    assert str(raised.value) == f"{PER}, not {shown}."


@pytest.mark.parametrize(("burst", "shown"), [(-1, "-1"), (1.5, "1.5"), (True, "True")])
def test_burst_is_a_whole_number_from_zero(burst, shown):
    with pytest.raises(ValueError) as raised:
        RateLimit(limit=5, burst=burst)
    assert str(raised.value) == (
        f"RateLimit burst must be a whole number from 0 to 2,147,483,647, not {shown}."
    )


@pytest.mark.parametrize("kind", [Concurrency, RateLimit])
@pytest.mark.parametrize(("group", "shown"), [("", "''"), (7, "7"), (b"stripe", "b'stripe'")])
def test_a_group_is_a_non_empty_string(kind, group, shown):
    with pytest.raises(TypeError) as raised:
        kind(limit=1, group=group)
    assert str(raised.value) == (
        f"{kind.__name__} group must be a non-empty string of at most 255 characters, or "
        f"None for the task's name, not {shown}."
    )


def test_a_group_has_no_colon_nul_byte_or_overlong_name():
    with pytest.raises(ValueError, match="Concurrency group must not contain ':'"):
        Concurrency(group="stripe:eu")
    with pytest.raises(ValueError, match="RateLimit group cannot be stored: .*NUL byte"):
        RateLimit(limit=1, group="stripe\x00")
    with pytest.raises(TypeError, match="Concurrency group must be a non-empty string of at most"):
        Concurrency(group="g" * 256)


@pytest.mark.parametrize("key", ["", "tenant id", "2fast", 7, b"tenant"])
def test_a_key_is_a_parameter_name_a_callable_or_none(key):
    with pytest.raises(TypeError, match="Concurrency key must be the name of one of the task's"):
        Concurrency(key=key)
    with pytest.raises(TypeError, match="RateLimit key must be the name of one of the task's"):
        RateLimit(key=key, limit=1)


def test_good_values_are_kept():
    assert Concurrency(key="tenant", limit=2, group="sync").limit == 2
    limit = RateLimit(key=len, limit=10, per=0.5, burst=3)
    assert (limit.interval, limit.burst, limit.group) == (0.05, 3, None)


# -- at decoration: ImproperlyConfigured naming the task ----------------------------------


def sync(tenant_id, full=False):
    return None


def anything(*values, **named):
    return None


def test_a_key_naming_no_parameter_fails_at_decoration():
    with pytest.raises(ImproperlyConfigured) as raised:
        task(sync, name="t.sync", concurrency=Concurrency(key="tenant", limit=2))
    assert str(raised.value) == (
        "@task t.sync: the Concurrency key 'tenant' names no parameter of the task "
        "(its parameters: tenant_id, full)."
    )
    with pytest.raises(ImproperlyConfigured, match="@task t.sync: the RateLimit key 'account'"):
        task(sync, name="t.sync", rate_limit=RateLimit(key="account", limit=1))
    assert registry.get("t.sync") is None, "nothing is registered"


def test_a_key_naming_star_args_or_star_star_kwargs_fails_at_decoration():
    with pytest.raises(ImproperlyConfigured) as raised:
        task(anything, name="t.any", concurrency=Concurrency(key="values"))
    assert str(raised.value).startswith(
        "@task t.any: the Concurrency key 'values' names the task's *values, which holds any "
        "number of arguments, not one value"
    )
    with pytest.raises(ImproperlyConfigured, match=r"key 'named' names the task's \*\*named"):
        task(anything, name="t.any", rate_limit=RateLimit(key="named", limit=1))


def test_the_context_of_a_takes_context_task_is_no_key():
    def handler(ctx, tenant_id):
        return None

    with pytest.raises(ImproperlyConfigured, match=r"key 'ctx' names no parameter.*: tenant_id\)"):
        task(handler, name="t.ctx", takes_context=True, concurrency=Concurrency(key="ctx"))
    assert task(
        handler, name="t.ctx", takes_context=True, concurrency=Concurrency(key="tenant_id")
    ).options.concurrency == Concurrency(key="tenant_id")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 2}, "@task t.bad: concurrency must be a jobqueue.Concurrency, not 2."),
        (
            {"concurrency": {"key": "tenant_id", "limit": 2}},
            "@task t.bad: concurrency must be a jobqueue.Concurrency, not {'key': 'tenant_id', "
            "'limit': 2}.",
        ),
        (
            {"concurrency": RateLimit(limit=1)},
            "@task t.bad: concurrency must be a jobqueue.Concurrency, not RateLimit(key=None, "
            "limit=1, per=1.0, burst=0, group=None) (a RateLimit is given as rate_limit=).",
        ),
        (
            {"rate_limit": Concurrency()},
            "@task t.bad: rate_limit must be a jobqueue.RateLimit, not Concurrency(key=None, "
            "limit=1, group=None) (a Concurrency is given as concurrency=).",
        ),
        ({"rate_limit": 10}, "@task t.bad: rate_limit must be a jobqueue.RateLimit, not 10."),
    ],
)
def test_an_option_that_is_no_limit_fails_at_decoration(options, message):
    with pytest.raises(ImproperlyConfigured) as raised:
        task(sync, name="t.bad", **options)
    assert str(raised.value) == message


def test_a_task_name_with_a_colon_needs_a_group():
    with pytest.raises(ImproperlyConfigured, match=r"@task t:sync: the Concurrency has no group"):
        task(sync, name="t:sync", concurrency=Concurrency(key="tenant_id"))
    named = task(sync, name="t:sync", concurrency=Concurrency(key="tenant_id", group="sync"))
    assert named.options.concurrency.group == "sync"


# -- .using(): TypeError naming the task --------------------------------------------------


def test_using_checks_its_limits_as_the_decorator_does():
    sync_task = task(sync, name="t.using")
    with pytest.raises(TypeError) as raised:
        sync_task.using(concurrency=Concurrency(key="tenant"))
    assert str(raised.value) == (
        "t.using.using(): the Concurrency key 'tenant' names no parameter of the task "
        "(its parameters: tenant_id, full)."
    )
    with pytest.raises(TypeError, match=r"t.using.using\(\): rate_limit must be a jobqueue"):
        sync_task.using(rate_limit=5)
    with pytest.raises(TypeError, match=r"t.using.using\(\): concurrency must be a jobqueue"):
        sync_task.using(queue="other").using(concurrency="tenant_id")
    any_task = task(anything, name="t.using_any")
    with pytest.raises(TypeError, match=r"key 'values' names the task's \*values"):
        any_task.using(rate_limit=RateLimit(key="values", limit=1))
    bound = sync_task.using(concurrency=Concurrency(key="tenant_id", limit=3))
    assert bound.options.concurrency == Concurrency(key="tenant_id", limit=3)


# -- a callable key's value, where no argument check comes first ------------------------


def keys_of(limit, *args, **kwargs):
    import inspect

    from jobqueue.tasks.limits import Limits

    def handler(*args, **kwargs):
        return None

    class Handler:  # what binding needs of a task (jobqueue.tasks.arguments.Signed)
        name = "t.keys"
        signature = inspect.signature(handler)

    return Limits("t.keys", limit, None).keys(Handler(), args, kwargs)


def test_a_callable_key_returning_a_huge_int_or_unstorable_text_is_refused():
    with pytest.raises(ValueError) as raised:
        keys_of(Concurrency(key=lambda: 10**300))
    assert str(raised.value).startswith(
        "t.keys: the Concurrency key test_a_callable_key_returning_a_huge_int_or_unstorable_text"
    )
    assert "returned over 200 characters (an integer of 997 bits)" in str(raised.value)
    with pytest.raises(ValueError, match=r"t.keys: the value the Concurrency key .* cannot be"):
        keys_of(Concurrency(key=lambda: "e\x00u"))
    assert keys_of(Concurrency(key=lambda region: region, group="g"), region=7) == ("g:7", None)
    assert keys_of(Concurrency(group="g")) == ("g", None)
