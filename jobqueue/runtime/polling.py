"""How long an idle worker waits before it looks for work again."""

from __future__ import annotations

SAFETY_POLL = 30.0  # even with LISTEN, look this often: a lost notification never strands a job


class PollBackoff:
    """Without LISTEN: ``first`` after an empty look, doubling after each one up to the cap,
    and back to ``first`` as soon as a look finds work."""

    def __init__(self, first: float, cap: float = SAFETY_POLL) -> None:
        self.first = min(first, cap)
        self.cap = cap
        self._next = self.first

    def empty_look(self) -> float:
        """The wait after a look that found nothing."""
        wait = self._next
        self._next = min(self._next * 2, self.cap)
        return wait

    def found_work(self) -> None:
        self._next = self.first
