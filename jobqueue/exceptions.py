"""Exceptions a handler raises, or a worker raises inside a handler."""

from __future__ import annotations

import math


class JobRunAborted(Exception):
    """This attempt no longer owns its job: its write was refused by the fence.

    Raised inside the worker (and inside ``ctx.step``) when a write about the job matched
    no row because the claim token changed or the lease has less than ``SAFETY_BUFFER``
    left. The attempt's outcome is logged and discarded, never written.
    """


class PermanentError(Exception):
    """Raise from a handler to fail the job now, without spending the remaining attempts."""


class Snooze(Exception):
    """Raise from a handler to come back later; the attempt is not counted."""

    def __init__(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"Snooze(seconds) takes a number of seconds, not {seconds!r}")
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(
                f"Snooze(seconds) takes a finite, non-negative number, not {seconds!r}"
            )
        super().__init__(seconds)
        self.seconds = float(seconds)
