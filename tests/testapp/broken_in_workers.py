"""A task module that fails to import in a worker process, as a bad deploy would.

The supervisor discovers tasks too (to count an on-demand pool's due jobs), so the module
imports there and fails only in ``runjobs --pool``: the supervisor runs, its workers cannot.
Named in ``JOBQUEUE["TASK_MODULES"]`` by the tests that need it, never by default.
"""

import sys

if "--pool" in sys.argv:
    raise ImportError("tests.testapp.broken_in_workers: broken on purpose in worker processes")
