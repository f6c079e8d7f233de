"""The soak's side table: what each handler run did, written by the handler itself.

Every row is written by a statement that also checks, in the same snapshot, that the job
still belongs to this run (its claim token) with at least SAFETY_BUFFER left on the lease:
the same fence the worker puts on its own writes. A handler paused by SIGSTOP past its lease
and then resumed no longer owns its job, so its late rows are refused instead of being
recorded as if it still ran the job; the checks then hold the product to what the fence
promises: no two owners at once, and nothing done twice that was recorded as done.
"""

from __future__ import annotations

from django.db import DatabaseError, connection

from jobqueue import JobRunAborted, conf

TABLE = "soak_record"

# One row per fenced event of a run: its start, each step function it executed, its end.
# ``at`` is the statement's now() (its transaction's start, before its snapshot), so a run's
# last row is older than the claim that took the job away from it, and that claim is older
# than the next run's first row: fenced intervals of one job can never overlap.
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    token text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('start', 'step', 'end')),
    step text,
    pid integer NOT NULL,
    at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS {TABLE}_job ON {TABLE} (job_id, at);
"""

FENCED_INSERT = f"""
INSERT INTO {TABLE} (job_id, token, kind, step, pid, at)
SELECT job.id, job.token, %(kind)s::text, %(step)s::text, %(pid)s::integer, now()
FROM jobqueue_job AS job
WHERE job.id = %(job_id)s AND job.token = %(token)s AND job.status = 'running'
  AND job.lease_until > now() + make_interval(secs => %(buffer)s::float8)
"""


def record(job_id: int, token: str, kind: str, pid: int, step: str | None = None) -> None:
    """Write one fenced row, or raise ``JobRunAborted`` if this run no longer owns the job.

    A database error (PostgreSQL restarting) is a ``JobRunAborted`` too: the run cannot know
    whether it still owns the job, so it stops without an outcome and the lease decides,
    as it would for a worker that lost its connection.
    """
    params = {
        "kind": kind,
        "step": step,
        "pid": pid,
        "job_id": job_id,
        "token": token,
        "buffer": conf.get().safety_buffer,
    }
    try:
        with connection.cursor() as cursor:
            cursor.execute(FENCED_INSERT, params)
            written = cursor.rowcount
    except DatabaseError as exc:
        connection.close()  # a connection the server dropped is not reused
        raise JobRunAborted(f"soak: job {job_id}: could not record {kind}: {exc}") from exc
    if written != 1:
        raise JobRunAborted(f"soak: job {job_id}: run {token} no longer owns it ({kind})")
