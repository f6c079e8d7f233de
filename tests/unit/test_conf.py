"""Settings: typed defaults, and a clear error naming any bad key."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobqueue import conf


def test_defaults_match_the_contract():
    s = conf.build({})
    assert (s.lease, s.safety_buffer, s.timeout, s.max_attempts) == (300, 30, 900, 3)
    assert (s.backoff, s.on_crash, s.max_crashes) == ((1, 5, 3600), "retry", 3)
    assert (s.shutdown_timeout, s.poll_interval, s.heartbeat_interval) == (10, 2, 100)
    assert s.retention == {"succeeded": 3 * 86400, "failed": 30 * 86400, "discarded": 30 * 86400}
    assert s.pools["default"].is_catch_all and s.pools["default"].concurrency == 4


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"LEASE": 0}, 'JOBQUEUE["LEASE"] must be more than zero seconds'),
        ({"LEASE": "300"}, 'JOBQUEUE["LEASE"] must be a number of seconds'),
        ({"SAFETY_BUFFER": 250}, 'JOBQUEUE["SAFETY_BUFFER"] (250 s) must be less than two thirds'),
        ({"MAX_ATTEMPTS": 0}, 'JOBQUEUE["MAX_ATTEMPTS"] must be a whole number of 1 or more'),
        ({"BACKOFF": (1, 0.5, 10)}, 'JOBQUEUE["BACKOFF"] must be a (first, factor, cap) tuple'),
        ({"ON_CRASH": "ignore"}, 'JOBQUEUE["ON_CRASH"] must be "retry" or "park"'),
        ({"LEASES": 10}, 'JOBQUEUE["LEASES"] is not a jobqueue setting. Did you mean "LEASE"?'),
        ({"RETENTION": {"pending": 10}}, "JOBQUEUE[\"RETENTION\"] has 'pending'"),
        ({"RETENTION": {"failed": -1}}, 'JOBQUEUE["RETENTION"]["failed"] must be zero or more'),
        ({"POOLS": {}}, 'JOBQUEUE["POOLS"] must be a non-empty dict'),
        ({"POOLS": {"a": {"queues": []}}}, 'JOBQUEUE["POOLS"]["a"]["queues"] must be "*"'),
        ({"POOLS": {"a": {"concurrency": 0}}}, 'JOBQUEUE["POOLS"]["a"]["concurrency"] must be'),
        ({"POOLS": {"a": {}, "b": {"queues": "*"}}}, "more than one catch-all pool"),
        ({"ROUTING": {"emails": "fast"}}, 'JOBQUEUE["ROUTING"]["emails"] names pool \'fast\''),
        ({"TASK_MODULES": "app.jobs"}, 'JOBQUEUE["TASK_MODULES"] must be a list'),
        ({"TASK_MODULES": None}, 'JOBQUEUE["TASK_MODULES"] must be a list'),
        ({"SCHEDULES": None}, 'JOBQUEUE["SCHEDULES"] must be a dict'),
        (
            {"POOLS": {"a": {"concurency": 8}}},
            'JOBQUEUE["POOLS"]["a"] has an unknown option "concurency"',
        ),
    ],
)
def test_bad_settings_name_the_key(raw, message):
    with pytest.raises(ImproperlyConfigured) as excinfo:
        conf.build(raw)
    assert message in str(excinfo.value)


def test_none_retention_keeps_rows_forever():
    assert conf.build({"RETENTION": {"succeeded": None}}).retention["succeeded"] is None


def test_settings_follow_override_settings(settings):
    settings.JOBQUEUE = {"LEASE": 60, "SAFETY_BUFFER": 5}
    assert conf.get().lease == 60
    settings.JOBQUEUE = {}
    assert conf.get().lease == 300


def test_system_check_reports_bad_settings(settings):
    from jobqueue.checks import check_settings

    settings.JOBQUEUE = {"ON_CRASH": "maybe"}
    [error] = check_settings()
    assert error.id == "jobqueue.E001" and 'JOBQUEUE["ON_CRASH"]' in error.msg


def test_system_check_warns_without_a_catch_all_pool(settings):
    from jobqueue.checks import check_settings

    settings.JOBQUEUE = {"POOLS": {"fast": {"queues": ["emails"]}}}
    assert check_settings()[0].id == "jobqueue.W002"


def test_system_check_warns_about_deferred_sqlite_transactions(settings):
    from django.db import connections

    from jobqueue.checks import check_database

    conn = connections["default"]
    if conn.vendor != "sqlite":
        assert check_database() == []
        return
    options = conn.settings_dict["OPTIONS"]
    saved = options.pop("transaction_mode")
    try:
        [warning] = check_database()
        assert warning.id == "jobqueue.W001"
    finally:
        options["transaction_mode"] = saved
    assert check_database() == []


def test_pool_options_have_defaults_and_limits():
    pool = conf.build(
        {
            "POOLS": {
                "slow": {
                    "queues": "*",
                    "processes": 2,
                    "resident": False,
                    "idle_timeout": 5,
                    "max_memory": "512M",
                    "max_jobs": 100,
                    "time_limit": 3600,
                }
            }
        }
    ).pools["slow"]
    assert (pool.processes, pool.resident, pool.idle_timeout) == (2, False, 5)
    assert (pool.max_memory, pool.max_jobs, pool.time_limit) == (512 * 2**20, 100, 3600)
    default = conf.build({}).pools["default"]
    assert (default.processes, default.resident, default.max_memory) == (1, True, None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_memory": "lots"}, 'JOBQUEUE["POOLS"]["p"]["max_memory"] must be a size'),
        ({"max_memory": 0}, 'JOBQUEUE["POOLS"]["p"]["max_memory"] must be a size'),
        ({"processes": 0}, 'JOBQUEUE["POOLS"]["p"]["processes"] must be a whole number'),
        ({"resident": "no"}, 'JOBQUEUE["POOLS"]["p"]["resident"] must be True or False'),
        ({"idle_timeout": 0}, 'JOBQUEUE["POOLS"]["p"]["idle_timeout"] must be more than zero'),
        ({"time_limit": -5}, 'JOBQUEUE["POOLS"]["p"]["time_limit"] must be more than zero'),
        ({"max_jobs": 1.5}, 'JOBQUEUE["POOLS"]["p"]["max_jobs"] must be a whole number'),
    ],
)
def test_bad_pool_options_name_the_key(options, message):
    with pytest.raises(ImproperlyConfigured) as excinfo:
        conf.build({"POOLS": {"p": {"queues": "*", **options}}})
    assert message in str(excinfo.value)


def test_system_check_errors_for_a_task_queue_no_pool_serves(settings):
    from jobqueue.checks import check_settings

    # tests.testapp.tasks.send_email uses queue "emails"; shop's tasks use "feeds" and others.
    settings.JOBQUEUE = {"POOLS": {"fast": {"queues": ["emails"]}}, "ROUTING": {"feeds": "fast"}}
    messages = check_settings()
    assert messages[0].id == "jobqueue.W002"
    errors = {m.msg.split('"')[1]: m for m in messages if m.id == "jobqueue.E003"}
    assert "default" in errors and "emails" not in errors and "feeds" not in errors
    assert "tests.testapp.tasks.add" in errors["default"].msg


def test_a_queue_listed_by_two_pools_is_refused():
    with pytest.raises(ImproperlyConfigured, match='queue "emails" is listed by both "a" and "b"'):
        conf.build({"POOLS": {"a": {"queues": ["emails"]}, "b": {"queues": ["emails", "x"]}}})


TEN_YEARS = "at most 315,360,000 seconds (ten years)"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"LEASE": 1e308}, f'JOBQUEUE["LEASE"] must be {TEN_YEARS}, not 1e+308.'),
        ({"LEASE": 10**400}, 'JOBQUEUE["LEASE"] must be at most'),
        ({"LEASE": float("inf")}, 'JOBQUEUE["LEASE"] must be a number of seconds, not inf.'),
        ({"LEASE": float("nan")}, 'JOBQUEUE["LEASE"] must be a number of seconds, not nan.'),
        ({"SAFETY_BUFFER": 1e12}, f'JOBQUEUE["SAFETY_BUFFER"] must be {TEN_YEARS}'),
        ({"TIMEOUT": 1e12}, f'JOBQUEUE["TIMEOUT"] must be {TEN_YEARS}'),
        ({"SHUTDOWN_TIMEOUT": 1e12}, f'JOBQUEUE["SHUTDOWN_TIMEOUT"] must be {TEN_YEARS}'),
        ({"POLL_INTERVAL": 1e12}, f'JOBQUEUE["POLL_INTERVAL"] must be {TEN_YEARS}'),
        ({"RETENTION": {"failed": 1e12}}, f'JOBQUEUE["RETENTION"]["failed"] must be {TEN_YEARS}'),
        ({"BACKOFF": (1, 5, 1e12)}, 'JOBQUEUE["BACKOFF"] must be a (first, factor, cap) tuple'),
        ({"BACKOFF": (1e12, 1, 1e12)}, "each at most 315,360,000 (MAX_DELAY, ten years)"),
        ({"BACKOFF": (1, 10**400, 5)}, 'JOBQUEUE["BACKOFF"] must be a (first, factor, cap)'),
        ({"MAX_ATTEMPTS": 2**31}, 'JOBQUEUE["MAX_ATTEMPTS"] must be at most 2,147,483,647'),
        ({"MAX_CRASHES": 2**40}, 'JOBQUEUE["MAX_CRASHES"] must be at most 2,147,483,647'),
    ],
)
def test_every_duration_and_count_has_an_upper_bound_naming_the_key(raw, message):
    with pytest.raises(ImproperlyConfigured) as excinfo:
        conf.build(raw)
    assert message in str(excinfo.value)


def test_the_bounds_themselves_are_accepted():
    s = conf.build(
        {
            "LEASE": conf.MAX_DELAY,
            "TIMEOUT": conf.MAX_DELAY,
            "BACKOFF": (conf.MAX_DELAY, 1, conf.MAX_DELAY),
            "MAX_ATTEMPTS": 2**31 - 1,
            "RETENTION": {"succeeded": conf.MAX_DELAY},
        }
    )
    assert (s.lease, s.timeout, s.max_attempts) == (conf.MAX_DELAY, conf.MAX_DELAY, 2**31 - 1)
    assert conf.MAX_DELAY == 10 * 365 * 86400


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"idle_timeout": 1e308}, f'JOBQUEUE["POOLS"]["p"]["idle_timeout"] must be {TEN_YEARS}'),
        ({"time_limit": 1e12}, f'JOBQUEUE["POOLS"]["p"]["time_limit"] must be {TEN_YEARS}'),
        ({"time_limit": float("nan")}, 'JOBQUEUE["POOLS"]["p"]["time_limit"] must be a number'),
    ],
)
def test_pool_durations_are_bounded_too(options, message):
    with pytest.raises(ImproperlyConfigured) as excinfo:
        conf.build({"POOLS": {"p": {"queues": "*", **options}}})
    assert message in str(excinfo.value)


@pytest.mark.parametrize("size", ["", " ", "B", "K", "²M", "12.5M", "-1G", "M512"])
def test_a_bad_max_memory_is_a_clear_error_not_a_traceback(size):
    with pytest.raises(ImproperlyConfigured) as excinfo:
        conf.build({"POOLS": {"p": {"queues": "*", "max_memory": size}}})
    assert str(excinfo.value) == (
        'JOBQUEUE["POOLS"]["p"]["max_memory"] must be a size such as "512M", "2G" or a number '
        f"of bytes, not {size!r}."
    )


def test_the_system_check_reports_an_empty_max_memory(settings):
    from jobqueue.checks import check_settings

    settings.JOBQUEUE = {"POOLS": {"default": {"max_memory": ""}}}
    [error] = check_settings()
    assert error.id == "jobqueue.E001"
    assert 'JOBQUEUE["POOLS"]["default"]["max_memory"] must be a size' in error.msg


@pytest.mark.parametrize("routing", [{"emails": ["fast"]}, {"emails": {"pool": "fast"}}, {1: "x"}])
def test_a_routing_entry_that_is_not_two_strings_names_the_key(routing):
    with pytest.raises(ImproperlyConfigured, match=r'JOBQUEUE\["ROUTING"\] must map queue names'):
        conf.build({"ROUTING": routing})


def test_pool_for_is_routing_then_the_listing_pool_then_the_catch_all():
    s = conf.build(
        {
            "POOLS": {"fast": {"queues": ["emails"]}, "rest": {"queues": "*"}},
            "ROUTING": {"emails": "rest", "webhooks": "fast"},
        }
    )
    assert s.pool_for("emails") is s.pools["rest"]  # ROUTING wins over the listing
    assert s.pool_for("webhooks") is s.pools["fast"]
    assert s.pool_for("anything") is s.pools["rest"]
    assert s.named_queues == {"emails", "webhooks"}
    without_catch_all = conf.build({"POOLS": {"fast": {"queues": ["emails"]}}})
    assert without_catch_all.pool_for("emails") is without_catch_all.pools["fast"]
    assert without_catch_all.pool_for("anything") is None
