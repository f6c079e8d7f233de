"""The one reader of ``settings.JOBQUEUE``: typed defaults and validation.

Every other module asks :func:`get` for a :class:`Settings`; nothing else reads
``settings.JOBQUEUE``. A bad value raises ``ImproperlyConfigured`` naming the key, and the
system check in :mod:`jobqueue.checks` reports the same message at start-up.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from jobqueue import states

ON_CRASH_CHOICES = ("retry", "park")
POOL_OPTIONS = (
    "queues",
    "processes",
    "concurrency",
    "prefetch",
    "resident",
    "idle_timeout",
    "max_memory",
    "max_jobs",
    "time_limit",
)
MEMORY_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
CATCH_ALL = "*"
# The longest delay jobqueue accepts at enqueue or applies to a job it puts back (a retry's
# backoff, a Snooze): ten years. Longer ones are refused at enqueue, naming the argument,
# and clamped to this when a worker applies them, so that no run_at leaves the range every
# database and Python's datetime can hold.
MAX_DELAY = 10 * 365 * 86400
# The largest value of a PostgreSQL integer column (Job.max_attempts, Job.crashes).
MAX_INTEGER_COLUMN = 2**31 - 1

Backoff = tuple[float, float, float] | Callable[[int], float]

DEFAULTS: dict[str, Any] = {
    "LEASE": 300,
    "SAFETY_BUFFER": 30,
    "TIMEOUT": 900,
    "MAX_ATTEMPTS": 3,
    "BACKOFF": (1, 5, 3600),
    "ON_CRASH": "retry",
    "MAX_CRASHES": 3,
    "SHUTDOWN_TIMEOUT": 10,
    "POLL_INTERVAL": 2,
    "RETENTION": {
        states.SUCCEEDED: 3 * 86400,
        states.FAILED: 30 * 86400,
        states.DISCARDED: 30 * 86400,
    },
    "POOLS": {"default": {"queues": CATCH_ALL, "concurrency": 4}},
    "ROUTING": {},
    "SCHEDULES": {},
    "TASK_MODULES": (),
    "LISTEN_URL": None,
    # runjobs serves Prometheus metrics on this port (jobqueue.metrics); None: not served.
    "METRICS_PORT": None,
    # jobqueue.contrib.webhooks: read only by its delivery task.
    "WEBHOOKS": {"TIMEOUT": 10, "ALLOW_NETWORKS": []},
}
WEBHOOK_OPTIONS = ("TIMEOUT", "ALLOW_NETWORKS")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class PoolSpec:
    name: str
    queues: tuple[str, ...] | None  # None: the catch-all pool
    concurrency: int = 4
    prefetch: int | None = None  # jobs claimed ahead of the slots; None: 16 per slot
    processes: int = 1
    resident: bool = True  # False: the supervisor runs it only while jobs are due
    idle_timeout: float = 60.0  # s an on-demand worker waits with nothing due before exiting
    max_memory: int | None = None  # bytes; checked between jobs
    max_jobs: int | None = None  # jobs a process runs before it is recycled
    time_limit: float | None = None  # s a process lives before it is recycled

    @property
    def is_catch_all(self) -> bool:
        return self.queues is None


@dataclass(frozen=True)
class WebhookSettings:
    """``JOBQUEUE["WEBHOOKS"]``, for :mod:`jobqueue.contrib.webhooks`."""

    timeout: float = 10.0  # s for connecting, and for the whole request
    # The one way past the SSRF guard: receivers inside these networks may be reached.
    allow_networks: tuple[Network, ...] = ()


@dataclass(frozen=True)
class Settings:
    lease: float
    safety_buffer: float
    timeout: float
    max_attempts: int
    backoff: Backoff
    on_crash: str
    max_crashes: int
    shutdown_timeout: float
    poll_interval: float
    retention: Mapping[str, float | None]
    pools: Mapping[str, PoolSpec]
    routing: Mapping[str, str]
    schedules: Mapping[str, Any] = field(default_factory=dict)
    task_modules: tuple[str, ...] = ()
    listen_url: str | None = None
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)
    metrics_port: int | None = None

    @property
    def heartbeat_interval(self) -> float:
        return self.lease / 3

    def catch_all_pool(self) -> PoolSpec | None:
        return next((p for p in self.pools.values() if p.is_catch_all), None)

    def pool_for(self, queue: str) -> PoolSpec | None:
        """The pool that serves ``queue``, or None if none does.

        The one routing rule, for the workers, the supervisor, the checks, the backend and
        ``jobs queues`` alike: ``ROUTING`` first, then the pool that lists the queue, else
        the catch-all pool. :func:`build` has checked that every route names a pool.
        """
        routed = self.routing.get(queue)
        if routed is not None:
            return self.pools[routed]
        for pool in self.pools.values():
            if pool.queues and queue in pool.queues:
                return pool
        return self.catch_all_pool()

    @property
    def named_queues(self) -> frozenset[str]:
        """The queues these settings name: routed by ``ROUTING`` or listed by a pool."""
        return frozenset(self.routing) | {q for p in self.pools.values() for q in p.queues or ()}


def _did_you_mean(name: object, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return f' Did you mean "{close[0]}"?' if close else ""


def _key(name: str) -> str:
    return f'JOBQUEUE["{name}"]'


def seconds(
    where: str, value: Any, *, allow_zero: bool = True, maximum: float = MAX_DELAY
) -> float:
    """Return ``value`` as float seconds, or raise naming ``where``.

    Every duration has an upper bound (``MAX_DELAY``, ten years, unless told otherwise):
    ``1e308`` is finite, but a timer, a ``timedelta`` or a lease built from it overflows.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise ImproperlyConfigured(f"{where} must be a number of seconds, not {value!r}.")
    # Compared, not converted, before the bound is known: float() of a huge int overflows.
    if value < 0 or (value == 0 and not allow_zero):
        bound = "zero or more" if allow_zero else "more than zero"
        raise ImproperlyConfigured(f"{where} must be {bound} seconds, not {_shown(value)}.")
    if value > maximum:
        raise ImproperlyConfigured(
            f"{where} must be at most {maximum:,.0f} seconds ({_as_days(maximum)}), "
            f"not {_shown(value)}."
        )
    return float(value)


def _shown(number: float) -> str:
    # repr() of a 5,000-digit integer raises ValueError.
    if isinstance(number, int) and number.bit_length() > 256:
        return f"an integer of {number.bit_length()} bits"
    return repr(number)


def _as_days(limit: float) -> str:
    return "ten years" if limit == MAX_DELAY else f"{limit / 86400:g} days"


def positive_int(where: str, value: Any, *, maximum: int | None = None) -> int:
    """Return ``value`` if it is a whole number of 1 or more, or raise naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ImproperlyConfigured(
            f"{where} must be a whole number of 1 or more, not {_shown(value)}."
        )
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{where} must be at most {maximum:,}, not {_shown(value)}.")
    return value


def non_negative_int(where: str, value: Any) -> int:
    """Return ``value`` if it is a whole number of 0 or more, or raise naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImproperlyConfigured(f"{where} must be a whole number of 0 or more, not {value!r}.")
    return value


def validate_backoff(where: str, value: Any) -> Backoff:
    """Return ``value`` if it is a ``(first, factor, cap)`` tuple or a callable."""
    if callable(value):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 3:
        first, factor, cap = value
        numbers = all(
            not isinstance(v, bool)
            and isinstance(v, (int, float))
            and abs(v) <= MAX_DELAY  # before isfinite, which overflows on a huge int
            and math.isfinite(v)
            for v in value
        )
        if numbers and first >= 0 and factor >= 1 and cap >= first:
            return (float(first), float(factor), float(cap))
    raise ImproperlyConfigured(
        f"{where} must be a (first, factor, cap) tuple with first >= 0, factor >= 1 and "
        f"cap >= first, each at most {MAX_DELAY:,} (MAX_DELAY, ten years), or a callable "
        f"taking the attempt number; got {_shown_any(value)}."
    )


def _shown_any(value: Any) -> str:
    try:
        return repr(value)
    except ValueError:  # a 5,000-digit integer inside
        return f"a {type(value).__name__}"


def validate_on_crash(where: str, value: Any) -> str:
    if value not in ON_CRASH_CHOICES:
        raise ImproperlyConfigured(f'{where} must be "retry" or "park", not {value!r}.')
    return value


def _pools(value: Any) -> dict[str, PoolSpec]:
    if not isinstance(value, Mapping) or not value:
        raise ImproperlyConfigured(
            f"{_key('POOLS')} must be a non-empty dict of pool name -> options."
        )
    pools = {}
    for name, options in value.items():
        where = f'{_key("POOLS")}["{name}"]'
        if not isinstance(name, str) or not name:
            raise ImproperlyConfigured(f"{_key('POOLS')} has a pool with a bad name: {name!r}.")
        if not isinstance(options, Mapping):
            raise ImproperlyConfigured(f"{where} must be a dict, not {options!r}.")
        for option in options:
            if option not in POOL_OPTIONS:
                raise ImproperlyConfigured(
                    f'{where} has an unknown option "{option}"; a pool takes '
                    f"{', '.join(POOL_OPTIONS)}.{_did_you_mean(option, POOL_OPTIONS)}"
                )
        queues = options.get("queues", CATCH_ALL)
        if queues == CATCH_ALL:
            pool_queues = None
        elif (
            isinstance(queues, (list, tuple))
            and queues
            and all(isinstance(q, str) and q for q in queues)
        ):
            pool_queues = tuple(queues)
        else:
            raise ImproperlyConfigured(
                f'{where}["queues"] must be "*" or a non-empty list of queue names, not {queues!r}.'
            )
        pools[name] = _pool(name, where, pool_queues, options)
    listed: dict[str, str] = {}
    for pool in pools.values():
        for queue in pool.queues or ():
            if queue in listed:
                raise ImproperlyConfigured(
                    f'{_key("POOLS")}: queue "{queue}" is listed by both "{listed[queue]}" and '
                    f'"{pool.name}"; list it in one pool, or route it with {_key("ROUTING")}.'
                )
            listed[queue] = pool.name
    catch_alls = [p.name for p in pools.values() if p.is_catch_all]
    if len(catch_alls) > 1:
        raise ImproperlyConfigured(
            f'{_key("POOLS")} has more than one catch-all pool (queues "*"): '
            f"{', '.join(catch_alls)}."
        )
    return pools


def _pool(
    name: str, where: str, queues: tuple[str, ...] | None, options: Mapping[str, Any]
) -> PoolSpec:
    resident = options.get("resident", True)
    if not isinstance(resident, bool):
        raise ImproperlyConfigured(f'{where}["resident"] must be True or False, not {resident!r}.')
    max_jobs = options.get("max_jobs")
    prefetch = options.get("prefetch")
    time_limit = options.get("time_limit")
    max_memory = options.get("max_memory")
    return PoolSpec(
        name=name,
        queues=queues,
        concurrency=positive_int(f'{where}["concurrency"]', options.get("concurrency", 4)),
        prefetch=None if prefetch is None else non_negative_int(f'{where}["prefetch"]', prefetch),
        processes=positive_int(f'{where}["processes"]', options.get("processes", 1)),
        resident=resident,
        idle_timeout=seconds(
            f'{where}["idle_timeout"]', options.get("idle_timeout", 60), allow_zero=False
        ),
        max_memory=None
        if max_memory is None
        else memory_size(f'{where}["max_memory"]', max_memory),
        max_jobs=None if max_jobs is None else positive_int(f'{where}["max_jobs"]', max_jobs),
        time_limit=None
        if time_limit is None
        else seconds(f'{where}["time_limit"]', time_limit, allow_zero=False),
    )


def memory_size(where: str, value: Any) -> int:
    """Bytes from ``512M``, ``2G``, ``65536K`` or a whole number of bytes."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        text = value.strip().upper().removesuffix("B")
        # text[-1:] is "" for an empty value, and "" is in every string.
        number, unit = (text[:-1], text[-1]) if text and text[-1] in "KMG" else (text, "")
        # isascii(): "²".isdigit() is True, and int("²") raises.
        if number.isascii() and number.isdigit() and int(number) > 0:
            return int(number) * MEMORY_UNITS[unit]
    raise ImproperlyConfigured(
        f'{where} must be a size such as "512M", "2G" or a number of bytes, not {value!r}.'
    )


def _retention(value: Any) -> dict[str, float | None]:
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(f"{_key('RETENTION')} must be a dict of status -> seconds.")
    retention: dict[str, float | None] = dict(DEFAULTS["RETENTION"])
    for status, age in value.items():
        if status not in states.PRUNABLE:
            raise ImproperlyConfigured(
                f"{_key('RETENTION')} has {status!r}; only finished statuses are pruned: "
                f"{', '.join(states.PRUNABLE)}."
            )
        retention[status] = (
            None if age is None else seconds(f'{_key("RETENTION")}["{status}"]', age)
        )
    return retention


def port(where: str, value: Any) -> int:
    """Return ``value`` if it is a TCP port number (1 to 65535), or raise naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ImproperlyConfigured(
            f"{where} must be a TCP port number from 1 to 65535, not {_shown_any(value)}."
        )
    return value


def _webhooks(value: Any) -> WebhookSettings:
    where = _key("WEBHOOKS")
    if not isinstance(value, Mapping):
        raise ImproperlyConfigured(
            f'{where} must be a dict with "TIMEOUT" and "ALLOW_NETWORKS", not {value!r}.'
        )
    for option in value:
        if option not in WEBHOOK_OPTIONS:
            raise ImproperlyConfigured(
                f'{where} has an unknown option "{option}"; it takes '
                f"{', '.join(WEBHOOK_OPTIONS)}.{_did_you_mean(option, WEBHOOK_OPTIONS)}"
            )
    values = {**DEFAULTS["WEBHOOKS"], **value}
    networks = values["ALLOW_NETWORKS"]
    if not isinstance(networks, (list, tuple)):
        raise ImproperlyConfigured(
            f'{where}["ALLOW_NETWORKS"] must be a list of networks such as "10.1.0.0/16", '
            f"not {networks!r}."
        )
    allowed = []
    for network in networks:
        try:
            if not isinstance(network, str):
                raise TypeError
            allowed.append(ipaddress.ip_network(network))
        except (TypeError, ValueError) as exc:
            why = f": {exc}" if isinstance(exc, ValueError) else ""
            raise ImproperlyConfigured(
                f'{where}["ALLOW_NETWORKS"] has {network!r}, which is not a network in CIDR '
                f'notation such as "10.1.0.0/16" or "fd00::/8"{why}.'
            ) from None
    return WebhookSettings(
        timeout=seconds(f'{where}["TIMEOUT"]', values["TIMEOUT"], allow_zero=False),
        allow_networks=tuple(allowed),
    )


def build(raw: Mapping[str, Any] | None) -> Settings:
    """Validate a ``JOBQUEUE`` dict and return typed settings."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured(f"settings.JOBQUEUE must be a dict, not {type(raw).__name__}.")
    for key in raw:
        if key not in DEFAULTS:
            raise ImproperlyConfigured(
                f"{_key(key)} is not a jobqueue setting.{_did_you_mean(key, DEFAULTS)}"
            )
    values = {**DEFAULTS, **raw}

    lease = seconds(_key("LEASE"), values["LEASE"], allow_zero=False)
    buffer = seconds(_key("SAFETY_BUFFER"), values["SAFETY_BUFFER"])
    # A heartbeat renews every third of the lease, so a live worker always has at least two
    # thirds of it left; a buffer that large would refuse a healthy worker's writes.
    if buffer >= lease * 2 / 3:
        raise ImproperlyConfigured(
            f"{_key('SAFETY_BUFFER')} ({buffer:g} s) must be less than two thirds of "
            f"{_key('LEASE')} ({lease:g} s), or a live worker's writes would be refused."
        )
    routing = values["ROUTING"]
    if not isinstance(routing, Mapping):
        raise ImproperlyConfigured(f"{_key('ROUTING')} must be a dict of queue name -> pool name.")
    pools = _pools(values["POOLS"])
    for queue, pool in routing.items():
        if not isinstance(queue, str) or not queue or not isinstance(pool, str):
            raise ImproperlyConfigured(
                f"{_key('ROUTING')} must map queue names to pool names (strings), "
                f"not {queue!r}: {pool!r}."
            )
        if pool not in pools:
            raise ImproperlyConfigured(
                f'{_key("ROUTING")}["{queue}"] names pool {pool!r}, which is not in '
                f"{_key('POOLS')} ({', '.join(pools)})."
            )
    task_modules = values["TASK_MODULES"]
    if not isinstance(task_modules, (list, tuple)) or not all(
        isinstance(m, str) for m in task_modules
    ):
        raise ImproperlyConfigured(f"{_key('TASK_MODULES')} must be a list of module paths.")
    listen_url = values["LISTEN_URL"]
    if listen_url is not None and (not isinstance(listen_url, str) or not listen_url):
        raise ImproperlyConfigured(
            f"{_key('LISTEN_URL')} must be a PostgreSQL URL (postgres://...) or None."
        )
    if not isinstance(values["SCHEDULES"], Mapping):
        raise ImproperlyConfigured(f"{_key('SCHEDULES')} must be a dict.")
    return Settings(
        lease=lease,
        safety_buffer=buffer,
        timeout=seconds(_key("TIMEOUT"), values["TIMEOUT"]),
        # Job.max_attempts is a PostgreSQL integer column.
        max_attempts=positive_int(
            _key("MAX_ATTEMPTS"), values["MAX_ATTEMPTS"], maximum=MAX_INTEGER_COLUMN
        ),
        backoff=validate_backoff(_key("BACKOFF"), values["BACKOFF"]),
        on_crash=validate_on_crash(_key("ON_CRASH"), values["ON_CRASH"]),
        max_crashes=positive_int(
            _key("MAX_CRASHES"), values["MAX_CRASHES"], maximum=MAX_INTEGER_COLUMN
        ),
        shutdown_timeout=seconds(_key("SHUTDOWN_TIMEOUT"), values["SHUTDOWN_TIMEOUT"]),
        poll_interval=seconds(_key("POLL_INTERVAL"), values["POLL_INTERVAL"], allow_zero=False),
        retention=_retention(values["RETENTION"]),
        pools=pools,
        routing=dict(routing),
        schedules=dict(values["SCHEDULES"]),
        task_modules=tuple(task_modules),
        listen_url=listen_url,
        webhooks=_webhooks(values["WEBHOOKS"]),
        metrics_port=None
        if values["METRICS_PORT"] is None
        else port(_key("METRICS_PORT"), values["METRICS_PORT"]),
    )


@lru_cache(maxsize=1)
def get() -> Settings:
    """Return the validated settings; raises ``ImproperlyConfigured`` naming a bad key."""
    return build(getattr(django_settings, "JOBQUEUE", None))


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == "JOBQUEUE":
        get.cache_clear()
