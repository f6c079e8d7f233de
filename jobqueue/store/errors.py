"""How a failure is written down: the entry types a job's ``errors`` name, an exception
turned into an entry, and the text rules every database stores it by.

An entry's ``type`` is the dotted name of the exception that ended the attempt. For the
types jobqueue raises itself, that name is a contract: rows, alert rules and log searches
hold it, and Django's ``TaskError.exception_class`` imports it. Each keeps the path it was
first stored under (``stored_as``), and that path still imports it.

No database, no Django model: the store, the runtime, the ``django.tasks`` adapter and the
webhooks app all write entries through this module, and ``explain`` renders them.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from django.db import DataError, IntegrityError
from django.utils import timezone

from jobqueue.exceptions import PermanentError

MESSAGE_LIMIT = 10_000
TRACEBACK_LIMIT = 20_000
LAST_ERROR_LIMIT = 1_000  # last_error, the one line the admin and the logs show
# The ``type`` of a crash's entry: no handler raised, its worker was lost.
WORKER_LOST = "WorkerLost"

E = TypeVar("E", bound=type[BaseException])


def stored_as(module: str) -> Callable[[E], E]:
    """Give an entry type the module its rows have always named, so that the ``type``
    stored with each entry does not change when the class moves (the module named must
    still import it)."""

    def name(kind: E) -> E:
        kind.__module__ = module
        return kind

    return name


@stored_as("jobqueue.store")
class UnstorableOutcome(Exception):
    """The type named by the error entry of a job whose outcome could not be stored."""


@stored_as("jobqueue.runtime.attempt")
class AttemptTimeout(Exception):
    """The attempt ran past its task's timeout."""


@stored_as("jobqueue.runtime.attempt")
class HandlerLeftTransaction(Exception):
    """The handler returned, or raised, with a database connection still in a transaction
    (an ``atomic()`` block it never left, or autocommit turned off)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        # The handler raised PermanentError: the job fails now, as it asked.
        self.permanent = permanent


@stored_as("jobqueue.runtime.attempt")
class MalformedArguments(PermanentError):
    """The stored ``args`` is not a list, or ``kwargs`` not a dict (a row edited by hand)."""


class WorkerLost(Exception):
    """The worker running an attempt died: ``TaskError.exception_class`` of a crash entry,
    whose stored ``type`` is the bare ``WORKER_LOST``."""


class HasAttempt(Protocol):
    @property
    def attempt(self) -> int: ...


def type_name(kind: type[BaseException]) -> str:
    """An entry's ``type``: a builtin by its bare name, anything else by its dotted path."""
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def error_entry(exc: BaseException, job: HasAttempt, worker: str) -> dict[str, Any]:
    """One entry of ``Job.errors``: what failed, where, and when."""
    try:
        formatted = "".join(traceback.format_exception(exc))
    except Exception as error:  # a handler's exception can make even this raise
        formatted = f"(the traceback could not be formatted: {type(error).__name__})"
    # Capped, and with NUL bytes and lone surrogates escaped, so that every database stores
    # it and a 5 MB message is not written (and logged) whole on every attempt.
    return {
        "type": storable_text(type_name(type(exc)), MESSAGE_LIMIT),
        "message": storable_text(exception_text(exc), MESSAGE_LIMIT),
        "traceback": storable_text(formatted, TRACEBACK_LIMIT),
        "attempt": job.attempt,
        "at": timezone.now().isoformat(),
        "worker": worker,
    }


def summary(error: dict[str, Any]) -> str:
    """The one-line ``last_error`` for an error entry, at most ``LAST_ERROR_LIMIT`` long."""
    message = str(error.get("message") or "")
    # The first line of at most the head of the message: an entry's message is capped, but
    # splitting a long one only to keep its first line would be waste.
    first_line = message[: LAST_ERROR_LIMIT * 2].splitlines()[0] if message else ""
    kind = str(error.get("type", "Error"))
    return storable_text(f"{kind}: {first_line}" if first_line else kind, LAST_ERROR_LIMIT)


def refused_value(exc: BaseException) -> bool:
    """True for an error about a value (the database refused it, or it could not be
    encoded); False for one about reaching the database (``OperationalError``,
    ``InterfaceError``), which the lease and recovery see to."""
    return isinstance(
        exc, DataError | IntegrityError | ValueError | OverflowError | TypeError | RecursionError
    )


def storable_text(text: str, limit: int) -> str:
    """``text`` as every database stores it, in at most ``limit`` characters.

    NUL bytes and lone surrogates, which PostgreSQL refuses, are written as the escapes
    ``\\x00`` and ``\\ud800``. A longer text keeps its head and its tail and says how much
    was cut between them: "... [123,456 characters cut] ...".
    """
    if len(text) <= limit:
        if _storable(text):
            return text
        escaped = _escape(text)
        if len(escaped) <= limit:
            return escaped
    room = max(0, limit - _MARKER_ROOM)
    head, shown_head = _fit(text[: room // 2], room // 2, keep_end=False)
    tail_room = room - room // 2
    tail, shown_tail = _fit(text[len(text) - tail_room :] if tail_room else "", tail_room, True)
    cut = len(text) - shown_head - shown_tail
    return f"{head} … [{cut:,} characters cut] … {tail}"


# Room left for " … [1,234,567,890 characters cut] … " when a text is cut.
_MARKER_ROOM = 48


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escape(text: str) -> str:
    text = text.replace("\x00", "\\x00")
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _fit(raw: str, budget: int, keep_end: bool) -> tuple[str, int]:
    """The escaped form of as much of ``raw`` as fits ``budget``, kept from its start (or
    its end), and how many characters of ``raw`` that is."""
    escaped = _escape(raw)
    excess = len(escaped) - budget
    if excess > 0:
        # Each character escapes to one or more: dropping ``excess`` of them is enough.
        raw = raw[excess:] if keep_end else raw[: len(raw) - excess]
        escaped = _escape(raw)
    return escaped, len(raw)


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or what stands for it when that raises (a handler's own exception may)."""
    try:
        return str(exc)
    except Exception as error:
        try:
            why = f"{type(error).__name__}: {error}"
        except Exception:
            why = type(error).__name__
        return f"<str() of the {type(exc).__name__} raised {why}>"


def error_params(error: dict[str, Any]) -> dict[str, Any]:
    """An entry as the parameters of the statement that records it: the JSON entry, and
    the ``last_error`` line it gives."""
    # json.dumps may raise (a value a handler put in the entry): callers treat that as a
    # refused value, like a DataError of the write.
    return {"error": json.dumps(error), "last_error": summary(error)}
