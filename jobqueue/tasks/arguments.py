"""A call's arguments: bound to the handler's signature, and checked to be storable JSON.

One rule for every value a job stores (arguments at enqueue; results and step values in the
worker), on every database: :func:`json_problem` says what is wrong and where. A leaf
module: it imports nothing else from jobqueue, so the enqueue side, the tasks and the
runtime can all share it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any, Protocol
from weakref import WeakKeyDictionary

# The integers a job's JSON may hold, on every database alike: PostgreSQL's jsonb would take
# more, SQLite's JSON functions turn larger ones into floats, so the rule is SQLite's.
JSON_INT_RANGE = (-(2**63), 2**63 - 1)
# How deep lists and dicts may nest in arguments, results and step values. The walk that
# checks them is recursive; the limit keeps it (and json.dumps) far from Python's own.
MAX_NESTING = 100

# One call of a task: its positional and its keyword arguments.
Call = tuple[Sequence[Any], dict[str, Any]]


class Signed(Protocol):
    """What binding needs of a task: a ``jobqueue.tasks.Task``, or the django.tasks adapter."""

    @property
    def name(self) -> str: ...

    @property
    def signature(self) -> inspect.Signature: ...


def check_calls(task: Signed, calls: Sequence[Call]) -> None:
    """Raise ``TypeError``/``ValueError`` naming the argument unless every call is storable.

    The common call, positional JSON scalars, needs no more than a look at its types and
    values; any other goes through :func:`bind_arguments`, which says what is wrong.
    """
    parameters = _Parameters.of(task)
    arities = parameters.arities if parameters is not None else ()
    for args, kwargs in calls:
        if (
            kwargs
            or len(args) not in arities
            or not _SCALARS.issuperset(map(type, args))
            or not _plain(args)
        ):
            bind_arguments(task, args, kwargs)


def bind_arguments(task: Signed, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Check the call against the handler's signature, then check every value is JSON."""
    parameters = _Parameters.of(task)
    arguments = parameters.bind(args, kwargs) if parameters is not None else None
    if arguments is None:
        arguments = _bind(task, args, kwargs)
    for argument, value in arguments:
        if type(value) not in _SCALARS or not _scalar_ok(value):
            _check_json(task.name, argument, value)
        if "\x00" in argument or not argument.isascii():
            # A ``**kwargs`` name is any string the caller chose, stored as a JSON key.
            check_text(f"{task.name}: the name of keyword argument {argument!r}", argument)


def _bind(task: Signed, args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(argument, value)`` in signature order, ``*args`` and ``**kwargs`` spread out."""
    try:
        bound = task.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{task.name}: {exc}") from None
    arguments = []
    for param, value in bound.arguments.items():
        kind = task.signature.parameters[param].kind
        if kind is kind.VAR_POSITIONAL:
            arguments += [(f"*{param}[{offset}]", item) for offset, item in enumerate(value)]
        elif kind is kind.VAR_KEYWORD:
            arguments += value.items()
        else:
            arguments.append((param, value))
    return arguments


# Values that are JSON as they are once _scalar_ok agrees (no NUL or lone surrogate in a
# str, an int within JSON_INT_RANGE); any other type gets the full json_problem walk.
_SCALARS = frozenset({str, int, bool, type(None)})


class _Parameters:
    """A signature without ``*args`` or ``**kwargs``, as tuples and sets: binding a call to
    it is then a few lookups, where ``Signature.bind`` took most of an enqueue's Python time."""

    def __init__(self, signature: inspect.Signature) -> None:
        params = signature.parameters.values()
        self.names = tuple(p.name for p in params)
        self.positional = tuple(p.name for p in params if p.kind is not p.KEYWORD_ONLY)
        self.keywords = frozenset(p.name for p in params if p.kind is not p.POSITIONAL_ONLY)
        self.required = frozenset(p.name for p in params if p.default is p.empty)
        # How many positional arguments alone make a complete call.
        self.arities = frozenset(
            count
            for count in range(len(self.positional) + 1)
            if self.required.issubset(self.positional[:count])
        )

    @classmethod
    def of(cls, task: Signed) -> _Parameters | None:
        """The task's parameters, or None if it takes ``*args`` or ``**kwargs``."""
        signature = task.signature
        cached = _parameters.get(task)
        if cached is None or cached[0] is not signature:
            plain = not any(
                p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()
            )
            cached = _parameters[task] = (signature, cls(signature) if plain else None)
        return cached[1]

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[str, Any]] | None:
        """What ``_bind`` returns, or None where ``Signature.bind`` must decide (or explain)."""
        if len(args) > len(self.positional):
            return None
        given = self.positional[: len(args)]
        arguments = list(zip(given, args, strict=True))
        if not kwargs:
            return arguments if self.required.issubset(given) else None
        if not all(name in self.keywords and name not in given for name in kwargs):
            return None
        if not self.required.issubset((*given, *kwargs)):
            return None
        # Keyword arguments follow the positional ones, in signature order as bind() has them.
        return arguments + [(name, kwargs[name]) for name in self.names if name in kwargs]


def argument_value(task: Signed, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """The value a call checked by :func:`check_calls` gives the parameter ``name`` of the
    task's handler (its default where the call leaves it out), without ``Signature.bind``
    where the signature has no ``*args`` or ``**kwargs``."""
    parameters = _Parameters.of(task)
    if parameters is None:
        bound = task.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.arguments[name]
    if name in parameters.positional:
        index = parameters.positional.index(name)
        if index < len(args):
            return args[index]
    if name in kwargs:
        return kwargs[name]
    return task.signature.parameters[name].default


# Per task, keyed by its signature as well: the django.tasks adapter replaces it.
_parameters: WeakKeyDictionary[Any, tuple[inspect.Signature, _Parameters | None]] = (
    WeakKeyDictionary()
)


def _check_json(task_name: str, argument: str, value: Any) -> None:
    problem = _json_problem(value, "", 0)
    if problem:
        where, what, wrong_type = problem
        if wrong_type:
            raise TypeError(
                f"{task_name}: argument {argument!r}{where} is not JSON-serialisable ({what}); "
                "job arguments must be JSON: pass ids and plain values, not objects."
            )
        raise ValueError(f"{task_name}: argument {argument!r}{where} cannot be stored: {what}.")


def check_text(where: str, text: str) -> None:
    """Raise ``ValueError`` naming ``where`` if a database would refuse ``text``."""
    problem = text_problem(text)
    if problem:
        raise ValueError(f"{where} cannot be stored: it {problem}.")


def text_problem(text: str) -> str | None:
    """Why PostgreSQL would refuse ``text`` (a NUL byte, a lone surrogate), or None.

    SQLite stores both, so the rule is PostgreSQL's, for every database alike. ASCII text,
    nearly every string, is settled by two scans in C.
    """
    if "\x00" in text:
        return "contains a NUL byte (\\x00), which PostgreSQL cannot store in text or JSON"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"contains the lone surrogate {text[exc.start]!r} at offset {exc.start}, "
            "which is not valid UTF-8"
        )
    return None


def int_problem(number: int) -> str | None:
    """Why ``number`` is outside the integers a job's JSON may hold, or None."""
    low, high = JSON_INT_RANGE
    if low <= number <= high:
        return None
    # Not the number itself: str() of a 5,000-digit integer raises ValueError.
    shown = short_repr(number)
    return f"{shown} is outside the signed 64-bit range -2**63 .. 2**63-1"


def short_repr(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length():,} bits"
    return repr(value)


def json_problem(value: Any, path: str) -> tuple[str, str] | None:
    """Return ``(path, reason)`` for the first value that would not survive a JSON trip.

    The rules are the same for arguments, results and step values, on every database: JSON
    types only, finite floats, integers within :data:`JSON_INT_RANGE`, text without NUL
    bytes or lone surrogates (dict keys included), nesting at most :data:`MAX_NESTING` deep.
    ``reason`` is a phrase that reads on its own ("... contains a NUL byte ...").
    """
    problem = _json_problem(value, path, 0)
    return None if problem is None else (problem[0], problem[1])


def _json_problem(value: Any, path: str, depth: int) -> tuple[str, str, bool] | None:
    """``(path, reason, wrong_type)`` for the first bad value under ``value``."""
    if value is None or value is True or value is False:
        return None
    if isinstance(value, str):
        text = text_problem(value)
        return None if text is None else (path, f"a string that {text}", False)
    if isinstance(value, int):
        number = int_problem(value)
        return None if number is None else (path, number, False)
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return (path, f"{value!r} is not a finite number", True)
    if isinstance(value, (list, tuple, dict)) and depth >= MAX_NESTING:
        # A hundred levels of path say less than their first few.
        shown = path if len(path) <= 40 else f"{path[:30]}..."
        return (shown, f"lists and dicts nest more than {MAX_NESTING} levels deep", False)
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if type(item) in _SIMPLE and _scalar_ok(item):
                continue
            problem = _json_problem(item, f"{path}[{index}]", depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return (path, f"dict key {key!r} is a {type(key).__name__}, not a str", True)
            bad_key = text_problem(key)
            if bad_key:
                return (path, f"dict key {key!r} {bad_key}", False)
            if type(item) in _SIMPLE and _scalar_ok(item):
                continue
            inner = _json_problem(item, f"{path}[{key!r}]", depth + 1)
            if inner:
                return inner
        return None
    return (path, f"a {type(value).__module__}.{type(value).__qualname__}", True)


def _plain(values: Sequence[Any]) -> bool:
    """True if these JSON scalars are fine as they are: ints in range, ASCII text without NUL.

    The fast path of a bulk enqueue, one loop with no call per value; anything else (valid
    non-ASCII text included) goes through :func:`bind_arguments`, which says what is wrong.
    """
    low, high = JSON_INT_RANGE
    for value in values:
        kind = type(value)
        if kind is int:
            if not low <= value <= high:
                return False
        elif kind is str and ("\x00" in value or not value.isascii()):
            return False
    return True


# Types whose values need no walk, only _scalar_ok.
_SIMPLE = frozenset({str, int, float, bool, type(None)})


def _scalar_ok(value: Any) -> bool:
    """True if a value of a ``_SIMPLE`` type is fine as it is; the fast path of the walk."""
    kind = type(value)
    if kind is str:
        return "\x00" not in value and (value.isascii() or text_problem(value) is None)
    if kind is int:
        return JSON_INT_RANGE[0] <= value <= JSON_INT_RANGE[1]
    if kind is float:
        return math.isfinite(value)
    return True
