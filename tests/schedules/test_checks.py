"""Every mistake in JOBQUEUE["SCHEDULES"] is a system check error naming the schedule and the
key; a good configuration leaves ``manage.py check`` clean."""

import sys
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from jobqueue import conf
from jobqueue.checks import check_schedules
from jobqueue.runtime.worker import Worker
from jobqueue.schedules import spec as schedule_spec

ADD = "tests.testapp.tasks.add"
GOOD = {
    "nightly-feed": {
        "task": ADD,
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "args": [1],
        "kwargs": {"b": 2},
        "queue": "emails",
        "priority": 10,
        "max_attempts": 2,
    },
    "heartbeat-ping": {"task": "tests.testapp.tasks.noop", "every": 30},
    "half-second": {"task": "tests.testapp.tasks.noop", "every": 0.5},
}


def errors(settings, entry, name="nightly-feed"):
    settings.JOBQUEUE = {"SCHEDULES": {name: entry}}
    messages = check_schedules()
    assert all(m.id == "jobqueue.E004" for m in messages)
    return [m.msg for m in messages]


def entry(**options):
    return {"task": ADD, "cron": "0 3 * * *", "args": [1, 2], **options}


@pytest.mark.django_db
def test_a_good_configuration_is_clean(settings):
    settings.JOBQUEUE = {"SCHEDULES": GOOD}
    assert check_schedules() == []
    out = StringIO()
    call_command("check", stdout=out)
    assert "no issues" in out.getvalue()
    assert [s.name for s in schedule_spec.load(conf.get())] == [
        "half-second",
        "heartbeat-ping",
        "nightly-feed",
    ]


def test_the_time_zone_defaults_to_settings_time_zone(settings):
    settings.TIME_ZONE = "America/New_York"
    settings.JOBQUEUE = {"SCHEDULES": {"n": entry()}}
    assert schedule_spec.load(conf.get())[0].timezone == "America/New_York"


KEY = 'JOBQUEUE["SCHEDULES"]["nightly-feed"]'


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"cron": "61 * * * *"},
            f"{KEY}[\"cron\"]: '61 * * * *' is not a valid cron expression: Bad minute.",
        ),
        (
            {"cron": "0 3 * *"},
            f'{KEY}["cron"]: must be a cron expression of five fields (minute hour day month '
            "weekday), not '0 3 * *'.",
        ),
        (
            {"cron": "0 0 30 2 *"},
            f"{KEY}[\"cron\"]: '0 0 30 2 *' is not a valid cron expression: Bad day-of-month.",
        ),
        (
            {"timezone": "Europe/Bonn"},
            f"{KEY}[\"timezone\"]: 'Europe/Bonn' is not a known time zone.",
        ),
        ({"timezone": 1}, f'{KEY}["timezone"]: 1 is not a known time zone.'),
        (
            {"cron": None, "every": 0},
            f'{KEY}["every"]: must be more than zero seconds, not 0.',
        ),
        (
            {"cron": None, "every": -5},
            f'{KEY}["every"]: must be more than zero seconds, not -5.',
        ),
        (
            {"cron": None, "every": "30"},
            f"{KEY}[\"every\"]: must be a number of seconds, not '30'.",
        ),
        (
            {"every": 30},
            f'{KEY}: give "cron" or "every", one of them; this entry has both.',
        ),
        (
            {"cron": None},
            f'{KEY}: give "cron" or "every", one of them; this entry has neither.',
        ),
        (
            {"task": "tests.testapp.tasks.ad"},
            f'{KEY}["task"]: no installed app registers a task named '
            "'tests.testapp.tasks.ad'. Did you mean \"tests.testapp.tasks.add\"?",
        ),
        ({"task": None}, f'{KEY}["task"]: must name a registered task, not None.'),
        (
            {"args": [object()]},
            f'{KEY}["args"]: must be JSON, as job arguments are; [0] is a builtins.object.',
        ),
        (
            {"args": [1], "kwargs": {"b": float("nan")}},
            f"{KEY}[\"kwargs\"]: must be JSON, as job arguments are; ['b'] is nan is not a "
            "finite number.",
        ),
        ({"args": "1, 2"}, f"{KEY}[\"args\"]: must be a list of arguments, not '1, 2'."),
        ({"kwargs": [1]}, f'{KEY}["kwargs"]: must be a dict of arguments, not [1].'),
        (
            {"args": [1]},
            f'{KEY}["args"]: the task refuses these arguments: tests.testapp.tasks.add: '
            "missing a required argument: 'b'",
        ),
        (
            {"task": "tests.testapp.tasks.per_tenant", "args": [None], "kwargs": {}},
            f'{KEY}["args"]: the task refuses these arguments: tests.testapp.tasks.per_tenant: '
            "argument 'tenant' is the Concurrency key, so it must be a str or an int, not None.",
        ),
        (
            {"crontab": "0 3 * * *"},
            f'{KEY}["crontab"]: is not a schedule option; a schedule takes task, cron, every, '
            'timezone, args, kwargs, queue, priority, max_attempts. Did you mean "cron"?',
        ),
        (
            {"queue": ""},
            f'{KEY}["queue"]: queue must be a non-empty string of at most 100 characters, '
            "not ''.",
        ),
        ({"priority": 500}, f'{KEY}["priority"]: priority must be from -100 to 100, not 500.'),
        (
            {"max_attempts": 0},
            f'{KEY}["max_attempts"]: max_attempts must be a whole number from 1 to '
            "2,147,483,647, not 0.",
        ),
        ({"queue": None}, f'{KEY}["queue"]: must have a value; leave the key out instead.'),
    ],
)
def test_each_mistake_is_an_error_naming_the_schedule_and_the_key(settings, options, message):
    raw = {k: v for k, v in entry(**options).items() if v is not None or k in ("task", "queue")}
    assert errors(settings, raw) == [message]


def test_every_mistake_of_an_entry_is_listed(settings):
    found = errors(settings, {"task": ADD, "every": 0, "timezone": "Mars/Base", "colour": 1})
    assert [m.split(":")[0] for m in found] == [
        f'{KEY}["colour"]',
        f'{KEY}["timezone"]',
        f'{KEY}["every"]',
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "x" * 201,
            "a schedule's name must be a non-empty string of at most 200 characters",
        ),
        ("", "a schedule's name must be a non-empty string"),
        ("bad\x00name", "the name cannot be stored: it contains a NUL byte"),
    ],
)
def test_a_bad_name_is_an_error(settings, name, message):
    (found,) = errors(settings, entry(), name=name)
    assert message in found


def test_an_entry_that_is_not_a_dict(settings):
    assert errors(settings, "0 3 * * *") == [f"{KEY}: must be a dict of options, not '0 3 * * *'."]


def test_a_cron_schedule_without_cronsim_tells_the_user_what_to_install(settings, monkeypatch):
    # The library not installed: importing it raises ImportError.
    monkeypatch.setitem(sys.modules, "cronsim", None)
    settings.JOBQUEUE = {"SCHEDULES": {"nightly-feed": entry()}}
    (message,) = check_schedules()
    assert message.msg == (
        f'{KEY}["cron"]: cron schedules need the cronsim library: install '
        'django-jobqueue[cron] (or give "every" instead).'
    )
    assert "pip install django-jobqueue[cron]" in message.hint


def test_every_schedules_need_no_cron_library(settings, monkeypatch):
    monkeypatch.setitem(sys.modules, "cronsim", None)
    settings.JOBQUEUE = {"SCHEDULES": {"ping": {"task": ADD, "every": 5, "args": [1, 2]}}}
    assert check_schedules() == []


@pytest.mark.django_db
def test_manage_py_check_fails_on_a_bad_schedule(settings):
    settings.JOBQUEUE = {"SCHEDULES": {"nightly-feed": entry(cron="0 25 * * *")}}
    from django.core.management.base import SystemCheckError

    with pytest.raises(SystemCheckError, match=r'SCHEDULES"\]\["nightly-feed"\]\["cron"\]'):
        call_command("check")


@pytest.mark.django_db
def test_a_worker_refuses_to_start_with_a_bad_schedule(settings):
    settings.JOBQUEUE = {"SCHEDULES": {"nightly-feed": entry(timezone="Nowhere")}}
    with pytest.raises(ImproperlyConfigured, match=r'\["timezone"\]: \'Nowhere\' is not a known'):
        Worker(settings=conf.get())


def test_schedules_with_only_on_demand_pools_are_a_warning(settings):
    settings.JOBQUEUE = {
        "SCHEDULES": {"ping": {"task": ADD, "every": 5, "args": [1, 2]}},
        "POOLS": {"default": {"queues": "*", "resident": False}},
    }
    (warning,) = check_schedules()
    assert warning.id == "jobqueue.W004"
    assert 'every pool in JOBQUEUE["POOLS"] is on-demand' in warning.msg
    settings.JOBQUEUE = {"POOLS": {"default": {"queues": "*", "resident": False}}}
    assert check_schedules() == []
