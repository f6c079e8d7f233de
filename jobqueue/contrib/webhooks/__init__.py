"""Durable, signed webhooks: every delivery a job, verifiable by any Standard Webhooks receiver.

Add ``"jobqueue.contrib.webhooks"`` to ``INSTALLED_APPS`` after ``"jobqueue"``, create
:class:`~jobqueue.contrib.webhooks.models.Webhook` rows, and call :func:`send_event` where
something happens. See ``docs/webhooks.md``.
"""

from jobqueue.contrib.webhooks.events import send_event

__all__ = ["send_event"]
