"""PostgreSQL stopped for half a minute under a busy supervisor: the workers wait it out.

It stops the cluster of ``pg_cluster()`` (tests/conftest.py): in CI the one serving the
test database, which is why CI runs this test alone. In development point it at a cluster
of its own: ``DATABASE_URL=postgres://postgres@127.0.0.1:5433/test
JOBQUEUE_PG_CLUSTER="15 chaos"``; ``JOBQUEUE_TEST_OUTAGE=5`` shortens the outage.
"""

import os
import re
import time

import pytest
from django.db import DatabaseError, connection

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import BEHIND_PGBOUNCER, database_is_back, wait_for
from tests.testapp import tasks

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

OUTAGE = float(os.environ.get("JOBQUEUE_TEST_OUTAGE", "30"))
BUSY = {
    "POOLS": {"default": {"queues": "*", "concurrency": 2, "processes": 2}},
    "POLL_INTERVAL": 0.2,
}


def succeeded():
    return Job.objects.filter(status="succeeded").count()


def test_a_busy_supervisor_waits_out_a_database_outage(start_worker, pg_ctl):
    # About 8 s of work on four slots: the workers are busy when the database goes.
    before = tasks.nap.enqueue_many([(0.05,)] * 600)
    supervisor = start_worker(supervisor=True, settings=BUSY)
    wait_for(lambda: WorkerRow.objects.count() == 2, timeout=30, message="both workers")
    pids = set(WorkerRow.objects.values_list("pid", flat=True))
    wait_for(lambda: succeeded() >= 40, timeout=30, message="the workers to be busy")

    connection.close()
    pg_ctl("stop")
    try:
        went = time.monotonic()
        # Nothing is buffered: an enqueue while the database is away fails, to its caller.
        with pytest.raises(DatabaseError):
            tasks.nap.enqueue(0)
        connection.close()
        # The outage itself lasts this long, whatever happens meanwhile.
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - went)))
        assert supervisor.proc.poll() is None
    finally:
        pg_ctl("start")
    wait_for(database_is_back, timeout=60, interval=0.05, message="PostgreSQL to be back")

    # Work resumes within a few seconds of the database's return (backoff capped at 5 s).
    after = tasks.nap.enqueue_many([(0.01,)] * 20)
    wait_for(
        lambda: (
            Job.objects.filter(pk__in=[j.pk for j in after], status="succeeded").count()
            == len(after)
        ),
        timeout=10,
        message="jobs enqueued after the outage to run",
    )
    wait_for(
        lambda: Job.objects.filter(status="succeeded").count() == len(before) + len(after),
        timeout=60,
        message="every job enqueued before the outage to succeed too",
    )
    assert not Job.objects.exclude(status="succeeded").exists()

    # No worker left or was replaced: the same two processes, and no restart.
    assert set(WorkerRow.objects.values_list("pid", flat=True)) == pids
    log = supervisor.output()
    assert log.count("started worker") == 2
    assert "died" not in log and "restarting" not in log and "ended (" not in log
    # One line per worker when the database went, one when it came back; no traceback
    # per failed statement.
    gone = re.findall(r"worker (\S+): database unavailable \(", log)
    back = re.findall(r"worker (\S+): database is back after", log)
    assert len(gone) == len(set(gone)), log
    assert sorted(back) == sorted(gone), log
    # Behind PgBouncer a statement sent while the server is away may instead wait in the
    # pooler's queue until it is back (query_wait_timeout): that worker sees no outage.
    if not BEHIND_PGBOUNCER:
        assert len(gone) == 2, log
    assert not gone or "retrying with backoff up to 5 s" in log
    assert log.count("Traceback") == 0, log


def test_a_worker_started_while_the_database_is_away_waits_for_it(start_worker, pg_ctl):
    # What a supervisor replacing a dead child mid-outage does: the new worker must wait
    # for the database, not exit (its supervisor would back off, up to a minute).
    connection.close()
    pg_ctl("stop")
    try:
        worker = start_worker()
        if not BEHIND_PGBOUNCER:
            wait_for(
                lambda: "database unavailable" in worker.output(),
                timeout=30,
                message="the worker to meet the outage",
            )
        # Behind PgBouncer its first statement may instead wait in the pooler's queue until
        # the server is back (query_wait_timeout): it then sees no outage at all. Either
        # way it must still be there, waiting.
        time.sleep(min(OUTAGE, 3.0))  # a few of its retries, backing off
        assert worker.proc.poll() is None, worker.output()
    finally:
        pg_ctl("start")
    wait_for(database_is_back, timeout=60, interval=0.05, message="PostgreSQL to be back")
    job = tasks.nap.enqueue(0)
    wait_for(
        lambda: Job.objects.filter(pk=job.pk, status="succeeded").exists(),
        timeout=15,
        message="the job to run once the worker has registered",
    )
    log = worker.output()
    assert worker.proc.poll() is None, log
    if not BEHIND_PGBOUNCER:
        assert log.count("database unavailable (") == 1, log
        assert "while registering at start-up" in log
        assert "database is back after" in log
    assert log.count("Traceback") == 0, log
