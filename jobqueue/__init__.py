"""Durable background jobs stored as rows in the project's own database."""

from jobqueue.exceptions import Discard, JobRunAborted, PermanentError, Snooze
from jobqueue.tasks.base import task
from jobqueue.tasks.context import JobContext
from jobqueue.tasks.limits import Concurrency, RateLimit

__all__ = [
    "Concurrency",
    "Discard",
    "JobContext",
    "JobRunAborted",
    "PermanentError",
    "RateLimit",
    "Snooze",
    "task",
]
__version__ = "0.1.0.dev0"
