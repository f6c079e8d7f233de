"""One ``JOBQUEUE["SCHEDULES"]`` entry as a value: its ticks, and what is wrong with it.

No database here. ``load`` turns the settings into :class:`ScheduleSpec` values (and
refuses a bad entry); ``problems`` lists every mistake, each naming the schedule and the
key, for the system check.

Ticks are aware datetimes. ``every: N`` ticks at the multiples of N seconds since the Unix
epoch, so that every host agrees on them without talking to the others. ``cron`` ticks are
computed by cronsim in the schedule's time zone; on daylight-saving days a daily time in
the skipped hour runs once, just after the clocks jump, and one in the repeated hour runs
once, the first time round (a field with ``*`` in the hour runs in both passes of the
repeated hour, as with Debian's cron: those are different instants).
"""

from __future__ import annotations

import datetime as dt
import difflib
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from jobqueue import conf
from jobqueue.tasks import base as tasks
from jobqueue.tasks.arguments import bind_arguments, json_problem, text_problem
from jobqueue.tasks.enqueue import EnqueueOptions
from jobqueue.tasks.limits import Limits

# The options of one entry. The last three are as in ``Task.using()``.
KEYS = ("task", "cron", "every", "timezone", "args", "kwargs", "queue", "priority", "max_attempts")
ENQUEUE_OPTIONS = ("queue", "priority", "max_attempts")
# Schedule.name is a CharField of this length, and the idempotency key adds a prefix that
# must stay within the jobs' 255.
MAX_NAME_LENGTH = 200
# The idempotency key of every job a schedule enqueues. It is how "at most one unfinished
# run per schedule" holds: a user must not give this key to jobs of their own.
KEY_PREFIX = "jobqueue:schedule:"
_MICROSECOND = dt.timedelta(microseconds=1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Problem:
    """One mistake in one entry: ``key`` is None when it is about the entry as a whole."""

    schedule: str
    key: str | None
    message: str

    def __str__(self) -> str:
        return f"{where(self.schedule, self.key)}: {self.message}"


def where(schedule: object, key: str | None = None) -> str:
    """``JOBQUEUE["SCHEDULES"]["nightly-feed"]["cron"]``, as the messages name a key."""
    path = f'JOBQUEUE["SCHEDULES"][{_quoted(schedule)}]'
    return path if key is None else f'{path}["{key}"]'


def _quoted(name: object) -> str:
    return f'"{name}"' if isinstance(name, str) else repr(name)


@dataclass(frozen=True)
class ScheduleSpec:
    """One validated entry. ``options`` holds those of ``queue``, ``priority`` and
    ``max_attempts`` that were given, as ``Task.using()`` takes them."""

    name: str
    task_name: str
    cron: str | None
    every: float | None
    timezone: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def idempotency_key(self) -> str:
        return KEY_PREFIX + self.name

    @property
    def definition(self) -> str:
        """What the ticks are computed from, as stored in ``Schedule.definition``."""
        if self.cron is not None:
            return f"cron {self.cron} {self.timezone}"
        return f"every {_number(self.every)}"

    @property
    def expression(self) -> str:
        """For display: the cron text, or ``every 30 s``."""
        return self.cron if self.cron is not None else f"every {_number(self.every)} s"

    def next_after(self, moment: dt.datetime) -> dt.datetime:
        """The first tick strictly after ``moment`` (aware), in UTC."""
        if self.every is not None:
            step = _step(self.every)
            elapsed = _micros(moment)
            return _from_micros((elapsed // step + 1) * step)
        return _cron_next(self, moment, reverse=False)

    def latest_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        """The last tick at or before ``moment`` (aware), in UTC; None if there is none."""
        if self.every is not None:
            step = _step(self.every)
            return _from_micros(_micros(moment) // step * step)
        # cronsim's reverse iteration yields times strictly before its start.
        return _cron_next(self, moment + _MICROSECOND, reverse=True)


def _number(value: float | None) -> str:
    assert value is not None
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _step(every: float) -> int:
    # Whole microseconds, so that the multiples are exact and every host computes the same.
    return max(1, round(every * 1_000_000))


def _micros(moment: dt.datetime) -> int:
    delta = moment.astimezone(dt.UTC) - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _from_micros(micros: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(microseconds=micros)


def _cron_next(spec: ScheduleSpec, moment: dt.datetime, *, reverse: bool) -> dt.datetime:
    from cronsim import CronSim

    # cronsim works on wall-clock time in the zone of its start (whole minutes), and
    # returns wall-clock times with fold set in the repeated hour; astimezone(UTC)
    # reads the fold, so the repeated hour's two passes stay two instants.
    zone = zoneinfo.ZoneInfo(spec.timezone)
    local = moment.astimezone(zone)
    assert spec.cron is not None
    found: dt.datetime | None = next(iter(CronSim(spec.cron, local, reverse=reverse)), None)
    if found is None:
        raise ValueError(f"{spec.name}: cron {spec.cron!r} has no tick")
    return found.astimezone(dt.UTC)


def load(settings: conf.Settings) -> list[ScheduleSpec]:
    """The schedules of ``settings``, in name order; raises ``ImproperlyConfigured`` with
    the first problem (the system check lists them all)."""
    specs = []
    for name, raw in sorted(settings.schedules.items(), key=lambda item: str(item[0])):
        spec, found = _parse(name, raw)
        if found:
            raise ImproperlyConfigured(str(found[0]))
        assert spec is not None
        specs.append(spec)
    return specs


def problems(settings: conf.Settings) -> list[Problem]:
    """Every mistake in ``JOBQUEUE["SCHEDULES"]``, each naming the schedule and the key.

    Tasks are looked up among those registered once every installed app's ``tasks``
    module is imported (as a worker does at start-up).
    """
    found: list[Problem] = []
    registered: set[str] | None
    try:
        registered = set(tasks.discover())
    except Exception:  # an import error surfaces where the module is used
        registered = None
    for name, raw in sorted(settings.schedules.items(), key=lambda item: str(item[0])):
        spec, entry_problems = _parse(name, raw)
        found += entry_problems
        if spec is not None and registered is not None:
            found += _task_problems(spec, registered)
    return found


def _task_problems(spec: ScheduleSpec, registered: set[str]) -> list[Problem]:
    if spec.task_name not in registered:
        return [
            Problem(
                spec.name,
                "task",
                f"no installed app registers a task named {spec.task_name!r}."
                f"{_did_you_mean(spec.task_name, registered)}",
            )
        ]
    task = tasks.get(spec.task_name)
    assert task is not None
    try:
        bind_arguments(task, spec.args, dict(spec.kwargs))
        # A limit's key value that cannot be a key would fail every tick's enqueue.
        defaults = task.enqueue_defaults()
        Limits(task.name, defaults.concurrency, defaults.rate_limit).keys(
            task, spec.args, dict(spec.kwargs)
        )
    except (TypeError, ValueError) as exc:
        return [Problem(spec.name, "args", f"the task refuses these arguments: {exc}")]
    return []


def _did_you_mean(name: str, choices: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(choices), n=1)
    return f' Did you mean "{close[0]}"?' if close else ""


def _parse(name: object, raw: object) -> tuple[ScheduleSpec | None, list[Problem]]:
    """The entry as a spec if it is sound, and its problems (then the spec is None)."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
        return None, [
            Problem(
                str(name),
                None,
                f"a schedule's name must be a non-empty string of at most {MAX_NAME_LENGTH} "
                f"characters, not {name!r}.",
            )
        ]
    bad_text = text_problem(name)
    if bad_text:
        return None, [Problem(name, None, f"the name cannot be stored: it {bad_text}.")]
    if not isinstance(raw, Mapping):
        return None, [Problem(name, None, f"must be a dict of options, not {raw!r}.")]
    found = [
        Problem(
            name,
            str(key),
            f"is not a schedule option; a schedule takes {', '.join(KEYS)}."
            f"{_did_you_mean(str(key), set(KEYS))}",
        )
        for key in raw
        if key not in KEYS
    ]
    task_name = raw.get("task")
    if not isinstance(task_name, str) or not task_name:
        found.append(Problem(name, "task", f"must name a registered task, not {task_name!r}."))
    cron, every, zone = raw.get("cron"), raw.get("every"), raw.get("timezone")
    if zone is None:
        zone = django_settings.TIME_ZONE or "UTC"
    elif not _is_zone(zone):
        found.append(Problem(name, "timezone", f"{zone!r} is not a known time zone."))
    if (cron is None) == (every is None):
        both = "both" if cron is not None else "neither"
        found.append(
            Problem(name, None, f'give "cron" or "every", one of them; this entry has {both}.')
        )
    elif cron is not None:
        problem = _cron_problem(cron)
        if problem:
            found.append(Problem(name, "cron", problem))
    else:
        try:
            every = conf.seconds(where(name, "every"), every, allow_zero=False)
        except ImproperlyConfigured as exc:
            found.append(Problem(name, "every", _after_key(str(exc))))
    args, kwargs = raw.get("args", []), raw.get("kwargs", {})
    if not isinstance(args, (list, tuple)):
        found.append(Problem(name, "args", f"must be a list of arguments, not {args!r}."))
    else:
        found += _json_problems(name, "args", list(args))
    if not isinstance(kwargs, Mapping):
        found.append(Problem(name, "kwargs", f"must be a dict of arguments, not {kwargs!r}."))
    else:
        found += _json_problems(name, "kwargs", dict(kwargs))
    options = {key: raw[key] for key in ENQUEUE_OPTIONS if key in raw}
    found += _option_problems(name, options)
    if found:
        return None, found
    return (
        ScheduleSpec(
            name=name,
            task_name=str(task_name),
            cron=" ".join(cron.split()) if cron is not None else None,
            every=every,
            timezone=str(zone),
            args=tuple(args),
            kwargs=dict(kwargs),
            options=options,
        ),
        [],
    )


def _after_key(message: str) -> str:
    # conf's messages start with the key ("... must be a number"): the Problem names it.
    return message.split(" ", 1)[1] if message.startswith("JOBQUEUE") else message


def _is_zone(zone: object) -> bool:
    if not isinstance(zone, str) or not zone:
        return False
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def cron_installed() -> bool:
    try:
        import cronsim  # noqa: F401
    except ImportError:
        return False
    return True


def _cron_problem(cron: object) -> str | None:
    if not isinstance(cron, str) or len(cron.split()) != 5:
        return (
            "must be a cron expression of five fields (minute hour day month weekday), "
            f"not {cron!r}."
        )
    if not cron_installed():
        return (
            "cron schedules need the cronsim library: install django-jobqueue[cron] "
            '(or give "every" instead).'
        )
    from cronsim import CronSim, CronSimError

    try:
        CronSim(cron, dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    except CronSimError as exc:
        return f"{cron!r} is not a valid cron expression: {exc}."
    return None


def _json_problems(name: str, key: str, value: Any) -> list[Problem]:
    problem = json_problem(value, "")
    if problem is None:
        return []
    path, reason = problem
    return [Problem(name, key, f"must be JSON, as job arguments are; {path or 'it'} is {reason}.")]


def _option_problems(name: str, options: Mapping[str, Any]) -> list[Problem]:
    found = []
    for key, value in options.items():
        try:
            EnqueueOptions.build(task_name=name, defaults=None, **{key: value})
        except (TypeError, ValueError) as exc:
            found.append(Problem(name, key, str(exc).removeprefix(f"{name}: ")))
        else:
            if value is None:  # build() leaves None out, as using() does
                found.append(Problem(name, key, "must have a value; leave the key out instead."))
    return found
