"""The task API: ``@task`` and the calls it makes, what a job may store, and the enqueue.

``jobqueue.tasks`` is a public path (``from jobqueue.tasks import Call``): it hands on the
names of :mod:`jobqueue.tasks.base`. The modules of this package stand on the storage layer
(``jobqueue.store``, ``jobqueue.sql``, ``jobqueue.models``) and never import the runtime or
the operator's console.
"""

from jobqueue.tasks.base import BoundTask, Call, Task, task

__all__ = ["BoundTask", "Call", "Task", "task"]
