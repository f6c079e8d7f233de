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
from jobqueue.tasks.arguments import Signed, argument_value, check_text, short_repr

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
    if ":" in group:
        # The stored key is "<group>:<value>": a colon in the group would let two groups'
        # keys meet ("a:b" with value "c", "a" with value "b:c").
        raise ValueError(
            f"{what} must not contain ':' (it separates the group from the key's value), "
            f"not {group!r}."
        )


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
        self, task: Signed, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[str | None, str | None]:
        """The stored concurrency key and rate key of one call (already checked to fit the
        task's signature), or ``ValueError`` naming the argument whose value cannot be a
        key. A callable key gets the call's arguments as they were given."""
        return (
            None if self.concurrency is None else self._key(self.concurrency, task, args, kwargs),
            None if self.rate_limit is None else self._key(self.rate_limit, task, args, kwargs),
        )

    def _key(self, limit: Limit, task: Signed, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
        kind = type(limit).__name__
        group = self.group_of(limit)
        if limit.key is None:
            return group
        if callable(limit.key):
            value = limit.key(*args, **kwargs)
            name = getattr(limit.key, "__qualname__", None) or repr(limit.key)
            where = f"the {kind} key {name}()"
            is_wrong = f"{where} returned {{}}; it must return {{}}"
            label = f"{self.task_name}: the value {where} returned"
        else:
            value = argument_value(task, limit.key, args, kwargs)
            is_wrong = f"argument {limit.key!r} is the {kind} key, so it must be {{1}}, not {{0}}"
            label = f"{self.task_name}: argument {limit.key!r} (the {kind} key)"
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            shown = "None" if value is None else f"{type(value).__name__} {_shown(value)}"
            wrong = is_wrong.format(shown, "a str or an int")
            raise ValueError(f"{self.task_name}: {wrong}.")
        # An integer of more than 700 bits has more than 200 digits; str() of a huge one
        # would raise (Python's int-to-text digit limit) before it could be measured.
        text = str(value) if not isinstance(value, int) or value.bit_length() <= 700 else None
        if not text or len(text) > MAX_KEY_VALUE_LENGTH:
            length = f"{len(text):,}" if text is not None else "over 200"
            wrong = is_wrong.format(
                f"{length} characters ({_shown(value)})",
                f"from 1 to {MAX_KEY_VALUE_LENGTH} characters",
            )
            raise ValueError(f"{self.task_name}: {wrong}.")
        check_text(label, text)
        return f"{group}:{text}"


def _shown(value: Any) -> str:
    """``value`` for a message, cut short if its repr is long."""
    shown = short_repr(value)
    return shown if len(shown) <= 60 else f"{shown[:57]}..."


def check_limits(
    where: str, task_name: str, signature: inspect.Signature, concurrency: Any, rate_limit: Any
) -> None:
    """Raise ``TypeError`` naming ``where`` unless ``concurrency`` and ``rate_limit`` are a
    ``Concurrency`` and a ``RateLimit`` (or ``None``) whose keys fit the task.

    A key must name a parameter of ``signature`` that every call binds (not ``*args`` or
    ``**kwargs``); a limit without a group takes the task's name as its group, which must
    not contain the ``:`` that separates a stored key's group from its value.
    """
    _check_types(where, concurrency, rate_limit)
    for limit in (concurrency, rate_limit):
        if limit is None:
            continue
        kind = type(limit).__name__
        if limit.group is None and ":" in task_name:
            raise TypeError(
                f"{where}: the {kind} has no group, so its group is the task's name, which "
                "contains ':' (it separates the group from the key's value): give the limit "
                "a group=."
            )
        if isinstance(limit.key, str):
            _check_parameter(where, kind, limit.key, signature)


def _check_parameter(where: str, kind: str, key: str, signature: inspect.Signature) -> None:
    param = signature.parameters.get(key)
    if param is not None and param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        stars = "*" if param.kind == param.VAR_POSITIONAL else "**"
        raise TypeError(
            f"{where}: the {kind} key {key!r} names the task's {stars}{key}, which holds any "
            "number of arguments, not one value: name one parameter, or give a callable key "
            "that picks the value from the arguments."
        )
    if param is None:
        names = ", ".join(
            p.name
            for p in signature.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )
        raise TypeError(
            f"{where}: the {kind} key {key!r} names no parameter of the task "
            f"(its parameters: {names or 'none'})."
        )


def _check_types(where: str, concurrency: Any, rate_limit: Any) -> None:
    if concurrency is not None and not isinstance(concurrency, Concurrency):
        swapped = (
            " (a RateLimit is given as rate_limit=)" if isinstance(concurrency, RateLimit) else ""
        )
        raise TypeError(
            f"{where}: concurrency must be a jobqueue.Concurrency, not "
            f"{short_repr(concurrency)}{swapped}."
        )
    if rate_limit is not None and not isinstance(rate_limit, RateLimit):
        swapped = (
            " (a Concurrency is given as concurrency=)"
            if isinstance(rate_limit, Concurrency)
            else ""
        )
        raise TypeError(
            f"{where}: rate_limit must be a jobqueue.RateLimit, not "
            f"{short_repr(rate_limit)}{swapped}."
        )
