"""The options a task's jobs inherit: one rule for them, whoever gives them.

``max_attempts``, ``timeout``, ``on_crash`` and ``backoff`` come from ``@task(...)``, from a
``django.tasks`` task's options, or from the backend's ``OPTIONS``, and are checked here.
(``.using(max_attempts=...)`` is an option of one enqueue, which
:class:`jobqueue.tasks.enqueue.EnqueueOptions` checks with the same rule.) The check raises
``ValueError``; only a caller that reads a setting turns it into ``ImproperlyConfigured``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from jobqueue import conf
from jobqueue.tasks.arguments import short_repr

# Their names, as @task(...) takes them.
INHERITED_OPTIONS = ("max_attempts", "timeout", "on_crash", "backoff")
# Job.max_attempts is a PostgreSQL integer column.
MAX_ATTEMPTS_LIMIT = conf.MAX_INTEGER_COLUMN


def validate_options(options: Mapping[str, Any], where: Callable[[str], str]) -> dict[str, Any]:
    """Return ``options`` checked, or raise ``ValueError`` naming ``where(option)``.

    Every value given is checked, ``None`` included: a caller leaves out what it was not
    given. ``backoff`` comes back as a tuple of floats (or the callable), ``timeout`` as
    float seconds.
    """
    checked: dict[str, Any] = {}
    try:
        for option, value in options.items():
            if option == "max_attempts":
                checked[option] = max_attempts(where(option), value)
            elif option == "timeout":
                checked[option] = conf.seconds(where(option), value)
            elif option == "on_crash":
                checked[option] = conf.validate_on_crash(where(option), value)
            elif option == "backoff":
                checked[option] = conf.validate_backoff(where(option), value)
            else:
                raise TypeError(f"{option!r} is not one of {', '.join(INHERITED_OPTIONS)}.")
    except ImproperlyConfigured as exc:
        # conf's checks are written for settings; here the value is an argument.
        raise ValueError(str(exc)) from None
    return checked


def max_attempts(where: str, value: Any) -> int:
    """``value`` if it is a whole number from 1 to ``MAX_ATTEMPTS_LIMIT``, else a
    ``ValueError`` naming ``where``: the rule for a task's default and one enqueue's alike."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_ATTEMPTS_LIMIT
    ):
        raise ValueError(
            f"{where} must be a whole number from 1 to {MAX_ATTEMPTS_LIMIT:,}, "
            f"not {short_repr(value)}."
        )
    return value
