"""``jobqueue.pauses.pause`` and ``resume``, the public path of the pauses
(:mod:`jobqueue.store.pauses`) for scripts."""

from jobqueue.store.pauses import pause, resume

__all__ = ["pause", "resume"]
