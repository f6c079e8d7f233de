"""Flow control's declarations: ``Concurrency`` and ``RateLimit``, and each job's limit key.

A limit is declared on a task (``@task(concurrency=..., rate_limit=...)``) or on one enqueue
(``.using(...)``). Its ``key`` names one of the task's parameters, or is a callable of the
task's arguments, or ``None`` for one limit over every job of the ``group`` (by default the
task's name). At enqueue the key's value is computed and stored on the row as text,
``"<group>:<value>"``, beside the limit itself, so that the claim compares columns and never
parses JSON. The claim enforces both (:mod:`jobqueue.sql`); nothing here counts anything.

Every value is checked where it is given: a ``Concurrency`` or ``RateLimit`` when it is made,
its ``key`` against the task's signature at decoration, a key's value at enqueue, before any
SQL, so that a refused value leaves the caller's transaction as it was.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from jobqueue import conf
from jobqueue.tasks.arguments import check_text, short_repr

# A key's value, as text, and a group's name, in characters: the stored key is
# "<group>:<value>", within Job.concurrency_key's and Job.rate_key's 500.
MAX_KEY_VALUE_LENGTH = 200
MAX_GROUP_LENGTH = 255
MAX_LIMIT = conf.MAX_INTEGER_COLUMN

Key = str | Callable[..., Any] | None


def _check_limit(what: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValueError(
            f"{what} must be a whole number from 1 to {MAX_LIMIT:,}, not {short_repr(value)}."
        )


def _check_key(what: str, key: Any) -> None:
    if key is None or callable(key):
        return
    if not isinstance(key, str) or not key.isidentifier():
        raise TypeError(
            f"{what} must be the name of one of the task's parameters, a callable of the "
            f"task's arguments, or None, not {short_repr(key)}."
        )


def _check_group(what: str, group: Any) -> None:
    if group is None:
        return
    if not isinstance(group, str) or not group or len(group) > MAX_GROUP_LENGTH:
        raise TypeError(
            f"{what} must be a non-empty string of at most {MAX_GROUP_LENGTH} characters, "
            f"or None for the task's name, not {short_repr(group)}."
        )
    check_text(what, group)


@dataclass(frozen=True, kw_only=True)
class Concurrency:
    """At most ``limit`` jobs of one (group, key value) running at once, on every worker.

    Counted from the job rows that are ``running``: a job frees its slot when it ends, goes
    back to pending (a retry, a snooze) or is recovered from a dead worker.
    """

    key: Key = None
    limit: int = 1
    group: str | None = None

    def __post_init__(self) -> None:
        _check_key("Concurrency key", self.key)
        _check_limit("Concurrency limit", self.limit)
        _check_group("Concurrency group", self.group)


@dataclass(frozen=True, kw_only=True)
class RateLimit:
    """At most ``limit`` starts of one (group, key value) in any ``per`` seconds (plus
    ``burst`` more at once after a quiet spell), on every worker.

    The algorithm is GCRA (the generic cell rate algorithm): starts are spaced ``per /
    limit`` seconds apart, and ``burst`` lets that many more go early. Every start counts,
    whatever its attempt's outcome.
    """

    key: Key = None
    limit: int
    per: float = 1.0
    burst: int = 0
    group: str | None = None

    def __post_init__(self) -> None:
        _check_key("RateLimit key", self.key)
        _check_limit("RateLimit limit", self.limit)
        per = self.per
        if (
            isinstance(per, bool)
            or not isinstance(per, (int, float))
            or not math.isfinite(per)
            or not 0 < per <= conf.MAX_DELAY
        ):
            raise ValueError(
                f"RateLimit per must be a number of seconds above 0 and at most "
                f"{conf.MAX_DELAY:,}, not {short_repr(per)}."
            )
        burst = self.burst
        if isinstance(burst, bool) or not isinstance(burst, int) or not 0 <= burst <= MAX_LIMIT:
            raise ValueError(
                f"RateLimit burst must be a whole number from 0 to {MAX_LIMIT:,}, "
                f"not {short_repr(burst)}."
            )
        _check_group("RateLimit group", self.group)

    @property
    def interval(self) -> float:
        """Seconds between two starts at the steady rate."""
        return self.per / self.limit


Limit = Concurrency | RateLimit


class Limits(NamedTuple):
    """A task's two limits for one enqueue (either may be ``None``), bound to its name."""

    task_name: str
    concurrency: Concurrency | None
    rate_limit: RateLimit | None

    def __bool__(self) -> bool:
        return self.concurrency is not None or self.rate_limit is not None

    def group_of(self, limit: Limit) -> str:
        return limit.group if limit.group is not None else self.task_name

    def columns(self) -> dict[str, Any]:
        """The values every job of an enqueue shares: the limits, not their keys."""
        c, r = self.concurrency, self.rate_limit
        return {
            "concurrency_limit": None if c is None else c.limit,
            "rate_limit": None if r is None else r.limit,
            "rate_per": None if r is None else float(r.per),
            "rate_burst": None if r is None else r.burst,
        }

    def keys(
        self, signature: inspect.Signature, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[str | None, str | None]:
        """The stored concurrency key and rate key of one call, or ``ValueError`` naming the
        argument whose value cannot be a key."""
        return (
            None
            if self.concurrency is None
            else self._key(self.concurrency, signature, args, kwargs),
            None
            if self.rate_limit is None
            else self._key(self.rate_limit, signature, args, kwargs),
        )

    def _key(
        self,
        limit: Limit,
        signature: inspect.Signature,
        args: Sequence[Any],
        kwargs: dict[str, Any],
    ) -> str:
        kind = type(limit).__name__
        group = self.group_of(limit)
        if limit.key is None:
            return group
        if callable(limit.key):
            value = limit.key(*args, **kwargs)
            argument = f"the value {getattr(limit.key, '__name__', 'key')}() returned"
        else:
            # The call is already bound once by check_calls; this binds it for the value.
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            value = bound.arguments[limit.key]
            argument = f"argument {limit.key}"
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError(
                f"{self.task_name}: {argument} is the {kind} key, so it must be a str or an "
                f"int, not {type(value).__name__} {short_repr(value)}."
            )
        text = str(value)
        if not text or len(text) > MAX_KEY_VALUE_LENGTH:
            raise ValueError(
                f"{self.task_name}: {argument} is the {kind} key, so it must be from 1 to "
                f"{MAX_KEY_VALUE_LENGTH} characters, not {len(text)}: {short_repr(value)}."
            )
        check_text(f"{self.task_name}: {argument} (the {kind} key)", text)
        return f"{group}:{text}"


def check_limit_keys(task_name: str, signature: inspect.Signature, *limits: Limit | None) -> None:
    """Raise ``TypeError`` unless each limit's ``key`` names a parameter of ``signature``
    that every call binds (not ``*args`` or ``**kwargs``)."""
    for limit in limits:
        if limit is None or not isinstance(limit.key, str):
            continue
        param = signature.parameters.get(limit.key)
        if param is None or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            names = ", ".join(
                p.name
                for p in signature.parameters.values()
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            )
            raise TypeError(
                f"{task_name}: the {type(limit).__name__} key {limit.key!r} names no parameter "
                f"of the task (its parameters: {names or 'none'})."
            )


def check_limit_types(task_name: str, concurrency: Any, rate_limit: Any) -> None:
    """Raise ``TypeError`` unless the options are a ``Concurrency`` and a ``RateLimit``."""
    if concurrency is not None and not isinstance(concurrency, Concurrency):
        raise TypeError(
            f"{task_name}: concurrency must be a jobqueue.Concurrency, not "
            f"{short_repr(concurrency)}."
        )
    if rate_limit is not None and not isinstance(rate_limit, RateLimit):
        raise TypeError(
            f"{task_name}: rate_limit must be a jobqueue.RateLimit, not {short_repr(rate_limit)}."
        )
