"""Signals a project can connect to. Each is sent after the database change it reports."""

from django.dispatch import Signal

# New jobs became visible to workers (the enqueueing transaction committed).
# Arguments: queue, database.
jobs_committed = Signal()

# A worker started an attempt. Arguments: job_id, task_name, attempt, worker.
job_started = Signal()

# An attempt ended and its outcome was written. Arguments: job_id, task_name, status
# (the job's new status), attempt, worker.
job_finished = Signal()

# An operator (admin, ``manage.py jobs``, a script) sent jobs back to pending. Arguments:
# job_ids (the ids retried), using (the database alias).
jobs_retried = Signal()

# An operator discarded jobs; a running one's worker has lost its fence. Arguments: job_ids,
# using.
jobs_discarded = Signal()
