"""The PostgreSQL NOTIFY channel: the enqueue and the operator's statements send on it, and
every worker and supervisor LISTENs on it (:mod:`jobqueue.runtime.listener`).

A payload is a hint, never the truth. An enqueue's payload is the job's queue: the workers
that serve it look for work. An operator's Discard of a running job sends
``CANCEL_PREFIX`` followed by its id (``cancel:42``; a worker also reads a comma-separated
list, ``cancel:42,43``): the worker running it confirms with one fenced statement and
cancels the attempt (:mod:`jobqueue.runtime.cancel`). A worker older than that reads the
payload as a queue name and at most looks once for work: harmless.

A module of its own so that the enqueue side and the runtime can share the name without
either importing the other.
"""

NOTIFY_CHANNEL = "jobqueue"
CANCEL_PREFIX = "cancel:"
