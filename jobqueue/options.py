"""The options a task's jobs inherit: one rule for them, whoever gives them.

``max_attempts``, ``timeout``, ``on_crash`` and ``backoff`` come from ``@task(...)``, from a
``django.tasks`` task's options, or from the backend's ``OPTIONS``, and are checked here.
(``.using(max_attempts=...)`` is an option of one enqueue, checked with the others of its
kind by :class:`jobqueue.enqueue.EnqueueOptions`.) The check raises ``ValueError``; only a
caller that reads a setting turns it into ``ImproperlyConfigured``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from jobqueue import conf

# Their names, as @task(...) takes them.
INHERITED_OPTIONS = ("max_attempts", "timeout", "on_crash", "backoff")


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
                # Job.max_attempts is a PostgreSQL integer column.
                checked[option] = conf.positive_int(
                    where(option), value, maximum=conf.MAX_INTEGER_COLUMN
                )
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
