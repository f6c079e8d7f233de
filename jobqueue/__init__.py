"""Durable background jobs stored as rows in the project's own database."""

from jobqueue.exceptions import Discard, JobRunAborted, PermanentError, Snooze
from jobqueue.tasks import task

__all__ = ["Discard", "JobRunAborted", "PermanentError", "Snooze", "task"]
__version__ = "0.1.0.dev0"
