"""The PostgreSQL NOTIFY channel: the enqueue and the operator's statements send on it, and
every worker and supervisor LISTENs on it (:mod:`jobqueue.runtime.listener`).

A module of its own so that the enqueue side and the runtime can share the name without
either importing the other.
"""

NOTIFY_CHANNEL = "jobqueue"
