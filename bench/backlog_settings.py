"""Settings of W10's supervisors (``bench/backlog.py``): the bench's, plus a timer on the claim.

Every connection any thread of a worker opens gets an execute wrapper (Django's public
hook, found through ``connection_created``) that times each ``claim`` statement around the
driver's call, and appends ``<pid> <seconds> <wall-clock start> <jobs claimed>`` to the
file named by ``BENCH_CLAIM_LOG`` (the line pgqueuer's driver writes for its dequeue,
``bench/peers/_common.py``): the claim's time as the worker waits for it, round trip
included. One short write per claim, a few hundred a second at most: small beside the
statement it times. W10 also reads from it when every worker has claimed jobs.
"""

import os
import time
from typing import Any

from django.db.backends.signals import connection_created

from bench.settings import *  # noqa: F403

# How the claim statement begins (jobqueue/sql/postgresql.sql, comments stripped).
_CLAIM = "WITH done AS ("
_LOG = os.environ.get("BENCH_CLAIM_LOG")


def _timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    if _LOG is None or not sql.startswith(_CLAIM):
        return execute(sql, params, many, context)
    wall, started = time.time(), time.perf_counter()
    try:
        return execute(sql, params, many, context)
    finally:
        seconds = time.perf_counter() - started
        jobs = max(context["cursor"].rowcount, 0)
        with open(_LOG, "a") as log:
            log.write(f"{os.getpid()} {seconds:.6f} {wall:.6f} {jobs}\n")


def _wrap(sender: Any, connection: Any, **kwargs: Any) -> None:
    if _timed not in connection.execute_wrappers:
        connection.execute_wrappers.append(_timed)


connection_created.connect(_wrap, dispatch_uid="bench.backlog_settings")
