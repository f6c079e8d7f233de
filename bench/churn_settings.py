"""Settings of W8's worker (``bench/churn.py``): W10's, with the claim timed
(``bench/backlog_settings.py``), and a short retention.

Finished jobs are kept ``BENCH_CHURN_RETENTION`` seconds (60 by default; W8 sets it to its
sample interval), so that rows are pruned while the churn runs. The worker's own prune
chore runs at its start and then every ``PRUNE_INTERVAL`` (an hour, a constant of
``jobqueue.runtime.maintenance`` that no setting changes), so the bench prunes with the
same retention once an interval, as ``manage.py jobs prune`` from a cron job would.
"""

import os

from testproject.settings import JOBQUEUE

from bench.backlog_settings import *  # noqa: F403

_RETENTION = float(os.environ.get("BENCH_CHURN_RETENTION", "60"))
JOBQUEUE = {
    **JOBQUEUE,
    "RETENTION": {"succeeded": _RETENTION, "failed": _RETENTION, "discarded": _RETENTION},
}
