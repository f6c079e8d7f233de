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


class Discard(Exception):
    """Raise from a handler to end the job ``discarded`` now: there is nothing left to do.

    For work that became pointless rather than failed (what it was for was deleted or
    switched off): no retry, and the job is not counted among the failures an operator
    looks at. ``reason`` becomes ``last_error``; an operator's Retry still takes the job.
    """

    def __init__(self, reason: str) -> None:
        if not isinstance(reason, str) or not reason:
            raise TypeError(f"Discard(reason) takes a non-empty string, not {reason!r}")
        super().__init__(reason)
        self.reason = reason


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
