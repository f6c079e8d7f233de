-- Every hand-written MySQL and MariaDB statement of jobqueue, by name (Django's vendor
-- "mysql" is both). Written for MySQL 8.0+ and MariaDB 10.6+ alike, except where a comment
-- says otherwise; CI runs them on MariaDB 10.11 (docs/mysql.md says what is tested where).
--
-- Times come from the database clock, UTC_TIMESTAMP(6), as PostgreSQL's statements use
-- now(): workers on several hosts agree on leases. It is the time the statement began
-- (not the transaction's start, as now() is), and it is UTC, as Django stores datetimes on
-- MySQL (naive, in UTC). Durations arrive in seconds and are added as whole microseconds.
-- Lists and batches arrive as JSON text. A list of names or tokens is matched with
-- JSON_CONTAINS(list, JSON_QUOTE(column)): JSON strings compared exactly, as PostgreSQL and
-- SQLite compare text, whatever the table's collation (a _ci one would match "Emails" to
-- "emails"), and a test of each row rather than a join, so that the claim's scan keeps its
-- index's order (a semi-join with JSON_TABLE makes MariaDB sort). Ids and batches are read
-- with JSON_TABLE, whose text columns are utf8mb4_bin (a _bin collation wins a comparison
-- with the table's _ci one). Idempotency keys are compared as bytes (CAST ... AS BINARY),
-- as the unique index on unfinished_key, a varbinary, compares them: a _bin collation
-- would still ignore trailing spaces.
-- Parameters use pyformat (%(name)s); a literal percent sign is written %%.
--
-- Neither MySQL nor MariaDB has UPDATE ... RETURNING, nor writing CTEs, and MySQL forbids a
-- subquery on the table an UPDATE writes. So a write that reports the rows it wrote is a
-- pair in one transaction, run by jobqueue.sql.Queries: first "<name>_lock", a SELECT ...
-- FOR UPDATE of the rows and of what RETURNING would say, then "<name>", the UPDATE of
-- those rows by id (%(ids)s, a JSON array of the first column), which hold still under
-- their locks; and, where RETURNING would report values the UPDATE wrote, "<name>_read"
-- reads them back. Migration 0009_mysql adds the generated columns named here: claim_rank
-- (-priority of a pending job), running_lease (the lease of a running one) and
-- unfinished_key (the idempotency key of an unfinished one), each NULL otherwise, under the
-- indexes that the partial indexes are elsewhere.
--
-- In a single-table UPDATE, MySQL and MariaDB (unless its SIMULTANEOUS_ASSIGNMENT mode is
-- on) evaluate SET from left to right, each assignment seeing the columns set before it:
-- where one reads a column that another writes, the reader comes first.

-- name: enqueue
-- Insert a batch of jobs of one task, all with the same options: the shared values come as
-- scalars, the per-job ones as one JSON array of [args, kwargs, idempotency key] triples
-- (Queries keeps only the first of the triples that share a key). A row whose key an
-- unfinished job holds is left out by NOT EXISTS on the unique index jobqueue_job_unfinished_key;
-- one committed by another transaction after this statement's read makes the insert wait
-- for it and then fail on that index with a duplicate key, and Queries runs it again, which
-- then leaves it out: ON CONFLICT DO NOTHING, in two steps. (INSERT IGNORE would do it in
-- one, but it turns every other error of the row, a value too long, into a warning too.)
-- RETURNING on INSERT is MariaDB's (10.5+); MySQL has none (Queries then inserts the
-- batch one row at a time, with enqueue_one_plain).
-- trace_context is one value for the whole batch (the enqueue span's carrier, or NULL).
INSERT INTO jobqueue_job (
    task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts,
    crashes, on_crash, idempotency_key, last_error, errors, steps, enqueued_at, updated_at,
    trace_context, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_per,
    rate_burst
)
SELECT %(task_name)s, %(queue)s, %(priority)s, r.args, r.kwargs, 'pending',
       %(run_at)s, 0, %(max_attempts)s, 0, %(on_crash)s, r.idempotency_key, '', '[]', '{}',
       %(now)s, %(now)s, %(trace_context)s, r.concurrency_key, %(concurrency_limit)s,
       r.rate_key, %(rate_limit)s, %(rate_per)s, %(rate_burst)s
FROM JSON_TABLE(%(rows)s, '$[*]' COLUMNS (
    args JSON PATH '$[0]',
    kwargs JSON PATH '$[1]',
    idempotency_key varchar(255) COLLATE utf8mb4_bin PATH '$[2]',
    concurrency_key varchar(500) COLLATE utf8mb4_bin PATH '$[3]',
    rate_key varchar(500) COLLATE utf8mb4_bin PATH '$[4]'
)) AS r
WHERE r.idempotency_key IS NULL
   OR NOT EXISTS (
       SELECT 1 FROM jobqueue_job AS holder WHERE holder.unfinished_key = CAST(r.idempotency_key AS BINARY)
   )
RETURNING id, idempotency_key;

-- name: enqueue_one
-- The same for one job.
INSERT INTO jobqueue_job (
    task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts,
    crashes, on_crash, idempotency_key, last_error, errors, steps, enqueued_at, updated_at,
    trace_context, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_per,
    rate_burst
)
SELECT %(task_name)s, %(queue)s, %(priority)s, %(args)s, %(kwargs)s, 'pending',
       %(run_at)s, 0, %(max_attempts)s, 0, %(on_crash)s, %(idempotency_key)s, '', '[]', '{}',
       %(now)s, %(now)s, %(trace_context)s, %(concurrency_key)s, %(concurrency_limit)s,
       %(rate_key)s, %(rate_limit)s, %(rate_per)s, %(rate_burst)s
FROM DUAL
WHERE %(idempotency_key)s IS NULL
   OR NOT EXISTS (
       SELECT 1 FROM jobqueue_job AS holder
       WHERE holder.unfinished_key = CAST(%(idempotency_key)s AS BINARY)
   )
RETURNING id, idempotency_key;

-- name: claim_lock
-- The first of the claim's pair: lock up to %(claim_limit)s (%(limit)s for the slots free
-- now plus %(ahead)s to hold) due jobs of this worker's tasks and queues, highest priority
-- first, with everything the worker needs to run them. It reads the head of
-- jobqueue_job_claim (claim_rank, run_at, id), whose finished rows all sit in the NULL range
-- the scan starts past; SKIP LOCKED passes over rows other workers' claims hold. Queries
-- picks which to take (the free slots' and, after them, those that may be held: see the
-- PostgreSQL statement) and "claim" writes them; the rest are left pending, their locks
-- released at commit. A paused queue (a jobqueue_queuepause row) is left out, as in the
-- PostgreSQL claim: a subquery of a handful of rows that MariaDB materializes once, which
-- keeps the index's order (tests/storage/test_vendor_schema.py's EXPLAIN).
-- waited: seconds from due to this claim, for job_started's wait.
SELECT id, task_name, queue, priority, args, kwargs, attempts, max_attempts, crashes, steps,
       TIMESTAMPDIFF(MICROSECOND, run_at, UTC_TIMESTAMP(6)) / 1000000.0 AS waited,
       trace_context,
       on_crash = 'retry' AND crashes + 1 < %(max_crashes)s AS holdable
FROM jobqueue_job
WHERE claim_rank IS NOT NULL
  AND run_at <= UTC_TIMESTAMP(6)
  AND JSON_CONTAINS(%(task_names)s, JSON_QUOTE(task_name))
  AND (%(all_queues)s OR JSON_CONTAINS(%(queues)s, JSON_QUOTE(queue)))
  AND NOT JSON_CONTAINS(%(excluded)s, JSON_QUOTE(queue))
  AND queue NOT IN (SELECT p.queue FROM jobqueue_queuepause AS p)
ORDER BY claim_rank, run_at, id
LIMIT %(claim_limit)s
FOR UPDATE SKIP LOCKED;

-- name: claim
-- The second of the pair: the picked jobs, locked by claim_lock, become running. %(picked)s
-- maps each id to its token (made by Queries, as random as PostgreSQL's); a job for a free
-- slot (in %(free)s) starts at once, a held one keeps started_at NULL until the writer
-- records its start (record_started), so that recovery can tell it from one whose handler
-- ran. NULL, not left as it was: a retried job still has its previous attempt's start.
UPDATE jobqueue_job
SET status = 'running',
    token = JSON_UNQUOTE(JSON_EXTRACT(%(picked)s, CONCAT('$."', id, '"'))),
    lease_until = UTC_TIMESTAMP(6) + INTERVAL ROUND(%(lease)s * 1000000) MICROSECOND,
    worker = %(worker)s,
    attempts = attempts + 1,
    started_at = CASE
        WHEN id IN (SELECT id FROM JSON_TABLE(%(free)s, '$[*]' COLUMNS (id bigint PATH '$')) AS f)
        THEN UTC_TIMESTAMP(6)
    END,
    updated_at = UTC_TIMESTAMP(6)
WHERE id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i)
  AND status = 'pending';

-- name: record_started
-- The starts of held jobs a slot has taken since the writer's last statement, recorded in
-- the same transaction as its successes and its claim. Fenced by token and status, not by
-- the lease: the attempt still owns the job, and a start recorded late only makes recovery
-- count a crash, which a started handler deserves.
UPDATE jobqueue_job AS job
JOIN JSON_TABLE(%(started)s, '$[*]' COLUMNS (
    id bigint PATH '$.id',
    token varchar(32) COLLATE utf8mb4_bin PATH '$.token'
)) AS started ON job.id = started.id AND job.token = started.token
SET job.started_at = UTC_TIMESTAMP(6)
WHERE job.status = 'running';

-- name: next_due
-- Seconds until the earliest pending job of this worker's tasks and queues is due (0 or less
-- if one is due already), NULL if there is none: an idle worker sleeps until then.
SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), min(run_at)) / 1000000.0
FROM jobqueue_job
WHERE claim_rank IS NOT NULL
  AND JSON_CONTAINS(%(task_names)s, JSON_QUOTE(task_name))
  AND (%(all_queues)s OR JSON_CONTAINS(%(queues)s, JSON_QUOTE(queue)))
  AND NOT JSON_CONTAINS(%(excluded)s, JSON_QUOTE(queue))
  AND queue NOT IN (SELECT p.queue FROM jobqueue_queuepause AS p);

-- name: count_due
-- How many jobs of these tasks and queues have been due for %(grace)s s, counting no further
-- than %(limit)s: the supervisor starts that many on-demand workers at most.
SELECT count(*) FROM (
    SELECT 1
    FROM jobqueue_job
    WHERE claim_rank IS NOT NULL
      AND run_at <= UTC_TIMESTAMP(6) - INTERVAL ROUND(%(grace)s * 1000000) MICROSECOND
      AND JSON_CONTAINS(%(task_names)s, JSON_QUOTE(task_name))
      AND (%(all_queues)s OR JSON_CONTAINS(%(queues)s, JSON_QUOTE(queue)))
      AND NOT JSON_CONTAINS(%(excluded)s, JSON_QUOTE(queue))
      AND queue NOT IN (SELECT p.queue FROM jobqueue_queuepause AS p)
    LIMIT %(limit)s
) AS due;

-- name: succeed_many_lock
-- The successes in %(done)s whose fence still holds (token, running, a lease with
-- SAFETY_BUFFER left), locked: these ids are the ones succeed_many writes, in the same
-- transaction as the worker's claim.
SELECT job.id
FROM jobqueue_job AS job
JOIN JSON_TABLE(%(done)s, '$[*]' COLUMNS (
    id bigint PATH '$.id',
    token varchar(32) COLLATE utf8mb4_bin PATH '$.token'
)) AS done ON job.id = done.id AND job.token = done.token
WHERE job.status = 'running'
  AND job.lease_until > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(buffer)s * 1000000) MICROSECOND
FOR UPDATE;

-- name: succeed_many
-- The same write for several jobs in one statement (group commit): the rows succeed_many_lock
-- matched and locked, each with its result.
UPDATE jobqueue_job AS job
JOIN JSON_TABLE(%(done)s, '$[*]' COLUMNS (
    id bigint PATH '$.id',
    result JSON PATH '$.result'
)) AS done ON job.id = done.id
SET job.status = 'succeeded', job.result = done.result, job.lease_until = NULL,
    job.started_at = coalesce(job.started_at, UTC_TIMESTAMP(6)),
    job.finished_at = UTC_TIMESTAMP(6), job.updated_at = UTC_TIMESTAMP(6)
WHERE job.id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i);

-- name: retry
-- Fenced: a failed attempt with attempts left goes back to pending after its backoff.
-- (started_at: a held job's start may not have been recorded yet; retry, fail and snooze
-- record it, so that the row says when the latest attempt started.) JSON_EXTRACT(x, '$')
-- makes the entry JSON, which both servers append as a value rather than as a string.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, UTC_TIMESTAMP(6)),
    status = 'pending',
    run_at = UTC_TIMESTAMP(6) + INTERVAL ROUND(%(delay)s * 1000000) MICROSECOND,
    last_error = %(last_error)s,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_EXTRACT(%(error)s, '$')),
    lease_until = NULL, token = NULL, worker = NULL, updated_at = UTC_TIMESTAMP(6)
WHERE id = %(id)s AND token = %(token)s COLLATE utf8mb4_bin AND status = 'running'
  AND lease_until > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(buffer)s * 1000000) MICROSECOND;

-- name: fail
-- Fenced: out of attempts, or a PermanentError. The row stays, with its errors.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, UTC_TIMESTAMP(6)),
    status = 'failed', last_error = %(last_error)s,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_EXTRACT(%(error)s, '$')),
    lease_until = NULL, finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
WHERE id = %(id)s AND token = %(token)s COLLATE utf8mb4_bin AND status = 'running'
  AND lease_until > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(buffer)s * 1000000) MICROSECOND;

-- name: discard
-- Fenced: the handler raised Discard, there is nothing left to do. As fail, but the job ends
-- discarded; its entry in errors says why.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, UTC_TIMESTAMP(6)),
    status = 'discarded', last_error = %(last_error)s,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_EXTRACT(%(error)s, '$')),
    lease_until = NULL, finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6)
WHERE id = %(id)s AND token = %(token)s COLLATE utf8mb4_bin AND status = 'running'
  AND lease_until > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(buffer)s * 1000000) MICROSECOND;

-- name: snooze
-- Fenced: back to pending later without counting the attempt.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, UTC_TIMESTAMP(6)),
    status = 'pending',
    run_at = UTC_TIMESTAMP(6) + INTERVAL ROUND(%(delay)s * 1000000) MICROSECOND,
    attempts = attempts - 1, lease_until = NULL, token = NULL, worker = NULL,
    updated_at = UTC_TIMESTAMP(6)
WHERE id = %(id)s AND token = %(token)s COLLATE utf8mb4_bin AND status = 'running'
  AND lease_until > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(buffer)s * 1000000) MICROSECOND;

-- name: save_step
-- Fenced: record one finished step so a later attempt reuses its result.
UPDATE jobqueue_job
SET steps = JSON_SET(steps, %(path)s, JSON_EXTRACT(%(value)s, '$'))
WHERE id = %(id)s AND token = %(token)s COLLATE utf8mb4_bin AND status = 'running'
  AND lease_until > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(buffer)s * 1000000) MICROSECOND;

-- name: prune
-- Delete one batch of finished rows of one status older than %(age)s seconds (a DELETE may
-- have its own LIMIT here; an IN subquery may not).
DELETE FROM jobqueue_job
WHERE status = %(status)s
  AND finished_at < UTC_TIMESTAMP(6) - INTERVAL ROUND(%(age)s * 1000000) MICROSECOND
LIMIT %(batch)s;

-- name: register_worker
-- Insert or refresh this worker's row; a worker whose row was reaped while it was paused
-- comes back (its jobs, if rescued meanwhile, stay fenced off by their new tokens). The task
-- names it registered are written on every beat too, so a row re-inserted after a reap, or
-- one an older version wrote, soon says what this process claims; its resident memory too.
-- (The duplicate key can only be the primary key: the worker table has no other unique
-- index.)
INSERT INTO jobqueue_worker (id, hostname, pid, pool, queues, tasks, concurrency, memory, started_at, last_heartbeat)
VALUES (%(worker)s, %(hostname)s, %(pid)s, %(pool)s, %(queues)s, %(tasks)s, %(concurrency)s, %(memory)s, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE last_heartbeat = UTC_TIMESTAMP(6), tasks = %(tasks)s, memory = %(memory)s;

-- name: deregister_worker
DELETE FROM jobqueue_worker WHERE id = %(worker)s;

-- name: renew_leases_lock
-- The leases this worker holds that still have SAFETY_BUFFER left, each fenced by its token;
-- a job missing from the result has been lost.
SELECT id
FROM jobqueue_job
WHERE worker = %(worker)s AND status = 'running'
  AND JSON_CONTAINS(%(tokens)s, JSON_QUOTE(token))
  AND lease_until > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(buffer)s * 1000000) MICROSECOND
FOR UPDATE;

-- name: renew_leases
-- One statement renews every lease renew_leases_lock found.
UPDATE jobqueue_job
SET lease_until = UTC_TIMESTAMP(6) + INTERVAL ROUND(%(lease)s * 1000000) MICROSECOND
WHERE id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i);

-- name: held_jobs
-- Which of the jobs this worker holds (by id and claim token) are still its own: running
-- with the same token. A job missing was discarded (or taken over): its attempt is
-- cancelled. A read by primary key, for the cancel of a discarded job. MySQL has no NOTIFY
-- and no file to watch: a worker learns of a discard from its heartbeat (renew_leases
-- misses the job), every LEASE / 3, or at once when the discard ran in its own process.
SELECT id FROM jobqueue_job
WHERE id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i)
  AND worker = %(worker)s AND status = 'running'
  AND JSON_CONTAINS(%(tokens)s, JSON_QUOTE(token));

-- name: unclaim_lock
-- Jobs this worker claimed ahead and never started, to hand back; fenced like every worker
-- write (as renew_leases_lock).
SELECT id
FROM jobqueue_job
WHERE worker = %(worker)s AND status = 'running'
  AND JSON_CONTAINS(%(tokens)s, JSON_QUOTE(token))
  AND lease_until > UTC_TIMESTAMP(6) + INTERVAL ROUND(%(buffer)s * 1000000) MICROSECOND
FOR UPDATE;

-- name: unclaim
-- Hand them back: pending again, as if never claimed, with no attempt spent and no crash
-- counted.
UPDATE jobqueue_job
SET status = 'pending', attempts = GREATEST(attempts - 1, 0), lease_until = NULL,
    token = NULL, worker = NULL, updated_at = UTC_TIMESTAMP(6)
WHERE id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i);

-- name: recover_lock
-- The running jobs whose worker is gone: either every job whose lease expired (%(expired)s,
-- on the jobqueue_job_running_lease index), or the listed tokens of one worker that is
-- shutting down. SKIP LOCKED keeps two workers recovering at once from waiting on each
-- other, and the lock from applying the policy twice.
SELECT id
FROM jobqueue_job
WHERE status = 'running'
  AND ((%(expired)s AND running_lease < UTC_TIMESTAMP(6))
       OR (worker = %(worker)s
           AND (%(any_token)s
                OR JSON_CONTAINS(%(tokens)s, JSON_QUOTE(token)))))
FOR UPDATE SKIP LOCKED;

-- name: recover
-- Apply the crash policy to the jobs recover_lock locked. A job whose handler started
-- (started_at set) gets the crash policy: on_crash "retry" returns it to pending without
-- spending an attempt and counts a crash; "park", or the MAX_CRASHES-th crash, parks it as
-- abandoned for an operator. A job claimed ahead and never started (started_at NULL: held in
-- the worker's line) goes back to pending as unclaim hands it back: no attempt spent, no
-- crash counted, no error entry, last_error and run_at as they were.
-- A crash appends a WorkerLost entry holding the facts as fields, which only this statement
-- still sees (the worker's row, the lease it held); its words are rendered from them in
-- Python (jobqueue.explain), and explain_recovered writes them, in the same transaction.
-- Its times are ISO 8601 with their offset, as PostgreSQL writes them.
-- SET runs from left to right (see the top of this file): errors, finished_at, worker and
-- status read crashes, attempts, worker and lease_until before they change; started_at,
-- which says whether the handler started, is not written here.
UPDATE jobqueue_job
SET errors = CASE WHEN started_at IS NOT NULL
                  THEN JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT(
                      'type', 'WorkerLost', 'message', '', 'traceback', '',
                      'attempt', attempts,
                      'at', DATE_FORMAT(UTC_TIMESTAMP(6), '%%Y-%%m-%%dT%%H:%%i:%%s.%%f+00:00'),
                      'worker', worker,
                      'reason', %(reason)s,
                      'host', (SELECT w.hostname FROM jobqueue_worker AS w WHERE w.id = worker),
                      'pid', (SELECT w.pid FROM jobqueue_worker AS w WHERE w.id = worker),
                      'last_heartbeat', (
                          SELECT DATE_FORMAT(w.last_heartbeat,
                                             '%%Y-%%m-%%dT%%H:%%i:%%s.%%f+00:00')
                          FROM jobqueue_worker AS w WHERE w.id = worker),
                      'lease_until', DATE_FORMAT(lease_until, '%%Y-%%m-%%dT%%H:%%i:%%s.%%f+00:00'),
                      'policy', on_crash, 'crashes', crashes + 1,
                      'max_crashes', %(max_crashes)s,
                      'outcome', CASE WHEN on_crash = 'park' OR crashes + 1 >= %(max_crashes)s
                                      THEN 'abandoned' ELSE 'pending' END))
                  ELSE errors
             END,
    finished_at = CASE WHEN started_at IS NOT NULL
                            AND (on_crash = 'park' OR crashes + 1 >= %(max_crashes)s)
                       THEN UTC_TIMESTAMP(6) END,
    worker = CASE WHEN started_at IS NOT NULL
                       AND (on_crash = 'park' OR crashes + 1 >= %(max_crashes)s)
                  THEN worker END,
    status = CASE WHEN started_at IS NOT NULL
                       AND (on_crash = 'park' OR crashes + 1 >= %(max_crashes)s)
                  THEN 'abandoned' ELSE 'pending' END,
    crashes = crashes + (started_at IS NOT NULL),
    attempts = GREATEST(attempts - 1, 0),
    run_at = CASE WHEN started_at IS NOT NULL THEN UTC_TIMESTAMP(6) ELSE run_at END,
    lease_until = NULL,
    token = NULL,
    updated_at = UTC_TIMESTAMP(6)
WHERE id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i)
  AND status = 'running';

-- name: recover_read
-- What recover did, as PostgreSQL's RETURNING says it: the fifth column whether the handler
-- had started (a crash counted), the last the crash's entry.
SELECT id, task_name, queue, status, started_at IS NOT NULL,
       CASE WHEN started_at IS NOT NULL
            THEN JSON_EXTRACT(errors, CONCAT('$[', JSON_LENGTH(errors) - 1, ']')) END
FROM jobqueue_job
WHERE id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i);

-- name: explain_recovered
-- The words of the crashes recover just counted, rendered by jobqueue.explain from their
-- entries' fields: each becomes its entry's message and the job's last_error. Run in
-- recover's transaction, whose row locks still hold; it writes only the latest entry, and
-- only if that is a crash's.
UPDATE jobqueue_job AS job
JOIN JSON_TABLE(%(words)s, '$[*]' COLUMNS (
    id bigint PATH '$.id',
    message longtext PATH '$.message'
)) AS words ON job.id = words.id
SET job.last_error = words.message,
    job.errors = JSON_SET(job.errors, CONCAT('$[', JSON_LENGTH(job.errors) - 1, '].message'),
                          words.message)
WHERE JSON_UNQUOTE(JSON_EXTRACT(job.errors, CONCAT('$[', JSON_LENGTH(job.errors) - 1, '].type')))
      = 'WorkerLost';

-- name: reap_workers
-- Forget workers that have not renewed for a whole lease; their jobs are recovered above.
DELETE FROM jobqueue_worker
WHERE last_heartbeat < UTC_TIMESTAMP(6) - INTERVAL ROUND(%(lease)s * 1000000) MICROSECOND;

-- name: rescue_check
-- Whether any running job's lease has expired (on the jobqueue_job_running_lease index).
-- No writing CTEs: when none has, Queries runs reap_workers after it, as on SQLite.
SELECT EXISTS (
    SELECT 1 FROM jobqueue_job WHERE running_lease < UTC_TIMESTAMP(6)
);

-- name: unregistered_pending
-- Pending jobs, per queue and task, of the tasks no live worker (a row renewed within a
-- lease) has registered: no worker will ever claim them as things are. A row whose tasks
-- are not an array (tampered with) registers nothing. Run from a worker's maintenance timer
-- and by `jobs queues`, never on the claim path.
SELECT job.queue, job.task_name, count(*)
FROM jobqueue_job AS job
WHERE job.claim_rank IS NOT NULL
  AND job.task_name NOT IN (
      SELECT name.task_name
      FROM jobqueue_worker AS worker,
           JSON_TABLE(CASE WHEN JSON_TYPE(worker.tasks) = 'ARRAY' THEN worker.tasks
                           ELSE '[]' END,
                      '$[*]' COLUMNS (task_name varchar(255) COLLATE utf8mb4_bin PATH '$'))
           AS name
      WHERE worker.last_heartbeat
            > UTC_TIMESTAMP(6) - INTERVAL ROUND(%(lease)s * 1000000) MICROSECOND
        AND name.task_name IS NOT NULL
  )
GROUP BY job.queue, job.task_name
ORDER BY count(*) DESC, job.task_name, job.queue;


-- Operator side: Retry and Discard from the admin, `manage.py jobs` and scripts. {selection}
-- is replaced by a subquery of job ids (operator_ids below, or a Django filter compiled to
-- SQL), so a selection of any size is ONE locking read and ONE write, never a loop of saves.

-- name: operator_ids
-- The selection for an explicit list of job ids, given as JSON text.
SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS ids;

-- name: operator_retry_lock
-- failed, abandoned or discarded -> pending, due now, with a fresh budget (operator_retry):
-- the selected jobs that may be retried, locked. The guards sit here, read under the locks:
--  * a lease that has not run out means a worker may still be running the job (it renewed
--    it, or a discarded job's worker has not noticed yet): left alone, the live worker wins;
--  * a job whose idempotency key an unfinished job holds is left alone (the unique index
--    would refuse it anyway); of several selected jobs sharing a key only the newest is
--    retried, so the write cannot collide with itself.
-- An enqueue of the same key that commits before the write still collides; the store then
-- runs it all again. The second column is each job's queue, for the store to wake this
-- process's workers at commit (there is no NOTIFY).
SELECT job.id, job.queue
FROM jobqueue_job AS job
WHERE job.id IN ({selection})
  AND job.status IN ('failed', 'abandoned', 'discarded')
  AND (job.lease_until IS NULL OR job.lease_until < UTC_TIMESTAMP(6))
  AND (job.idempotency_key IS NULL OR (
      NOT EXISTS (
          SELECT 1 FROM jobqueue_job AS holder
          WHERE holder.unfinished_key = CAST(job.idempotency_key AS BINARY)
      )
      AND NOT EXISTS (
          SELECT 1 FROM jobqueue_job AS newer
          WHERE CAST(newer.idempotency_key AS BINARY) = CAST(job.idempotency_key AS BINARY)
            AND newer.id > job.id
            AND newer.status IN ('failed', 'abandoned', 'discarded')
            AND newer.id IN ({selection})
      )
  ))
FOR UPDATE;

-- name: operator_retry
-- The jobs operator_retry_lock locked, pending again: due now, attempts and crashes back to
-- 0; errors, last_error and finished steps stay (the next attempt reuses the steps).
UPDATE jobqueue_job
SET status = 'pending', run_at = UTC_TIMESTAMP(6), attempts = 0, crashes = 0, token = NULL,
    lease_until = NULL, worker = NULL, finished_at = NULL, updated_at = UTC_TIMESTAMP(6)
WHERE id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i);

-- name: operator_retry_skipped
-- Why each selected job operator_retry did not retry was left alone, counted by reason. Read
-- after the UPDATE, for the report only: the locked read made the decision.
SELECT CASE
           WHEN job.status NOT IN ('failed', 'abandoned', 'discarded') THEN job.status
           WHEN job.lease_until >= UTC_TIMESTAMP(6) THEN 'lease'
           WHEN EXISTS (
               SELECT 1 FROM jobqueue_job AS holder
               WHERE holder.unfinished_key = CAST(job.idempotency_key AS BINARY)
                 AND holder.id <> job.id
           ) THEN 'key'
           ELSE 'changed'
       END AS reason,
       count(*)
FROM jobqueue_job AS job
WHERE job.id IN ({selection})
  AND job.id NOT IN (SELECT id FROM JSON_TABLE(%(done)s, '$[*]' COLUMNS (id bigint PATH '$')) AS d)
GROUP BY reason;

-- name: operator_discard_lock
-- Any job but a succeeded (or already discarded) one -> discarded (operator_discard): the
-- selected jobs that may be, locked. Only a running job has a lease, so the lease returned
-- tells the store how many were running.
SELECT job.id, job.lease_until
FROM jobqueue_job AS job
WHERE job.id IN ({selection})
  AND job.status IN ('pending', 'running', 'failed', 'abandoned')
FOR UPDATE;

-- name: operator_discard
-- Clearing the token fences off a running job's worker: its heartbeat renews nothing (and
-- sets ctx.cancelled), and its outcome is refused. The lease is kept, so that a Retry waits
-- until it has run out and the old attempt cannot still be running.
UPDATE jobqueue_job
SET status = 'discarded', token = NULL, finished_at = UTC_TIMESTAMP(6),
    updated_at = UTC_TIMESTAMP(6)
WHERE id IN (SELECT id FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id bigint PATH '$')) AS i);

-- name: operator_discard_skipped
-- The status of each selected job operator_discard left alone, counted, for the report.
SELECT job.status, count(*)
FROM jobqueue_job AS job
WHERE job.id IN ({selection})
  AND job.id NOT IN (SELECT id FROM JSON_TABLE(%(done)s, '$[*]' COLUMNS (id bigint PATH '$')) AS d)
GROUP BY job.status;

-- name: queue_gauges
-- The metrics' gauges per queue, each count at most %(cap)s: the queues read from
-- jobqueue_job_queue_due (queue, status, run_at) by a loose index scan (one probe per
-- queue), then per queue a range of that index for each state, and its oldest due job.
-- Seconds late from %(now)s, as on SQLite (the caller's clock). MariaDB allows no outer
-- reference in a derived table, so a count cannot stop at the cap as on the other
-- databases (a LIMIT inside it): it reads the whole range, from the index only.
SELECT q.name,
    LEAST(%(cap)s, (SELECT count(*) FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'pending' AND j.run_at <= %(now)s)),
    LEAST(%(cap)s, (SELECT count(*) FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'pending' AND j.run_at > %(now)s)),
    LEAST(%(cap)s, (SELECT count(*) FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'running')),
    LEAST(%(cap)s, (SELECT count(*) FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'failed')),
    LEAST(%(cap)s, (SELECT count(*) FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'abandoned')),
    (SELECT TIMESTAMPDIFF(MICROSECOND, min(j.run_at), %(now)s) / 1000000.0 FROM jobqueue_job j
        WHERE j.queue = q.name AND j.status = 'pending' AND j.run_at <= %(now)s)
FROM (SELECT DISTINCT queue AS name FROM jobqueue_job) AS q;

-- name: queue_state_estimate
-- One queue's jobs in one status with run_at in (after, before], counted: past the
-- gauges' cap, where PostgreSQL would estimate (InnoDB's estimates are too rough).
SELECT count(*) FROM jobqueue_job
WHERE queue = %(queue)s AND status = %(status)s AND run_at <= %(before)s AND run_at > %(after)s;

-- name: stat_bucket
-- The start (epoch seconds) of the dashboard's bucket of %s seconds a stat row's minute falls
-- in. Seconds since 1970 by TIMESTAMPDIFF, not UNIX_TIMESTAMP, which reads a DATETIME in the
-- session's time zone: the stored times are UTC, whatever the session's zone.
-- (CAST: FLOOR of a quotient is a DECIMAL here, which Python reads as a Decimal.)
CAST(FLOOR(TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', minute) / %s) * %s AS SIGNED)

-- name: compact_stats_lock
-- The first of compact_stats' three (see postgresql.sql), in one transaction: the rows to
-- merge, locked, so that a second worker compacting at the same time waits here until the
-- first commits, and its insert then reads them gone (READ COMMITTED: each statement sees
-- what was committed before it). Without it, both could read the rows and count them twice.
SELECT id FROM jobqueue_minutestat
WHERE span = %(from_span)s AND minute < %(before)s
FOR UPDATE;

-- name: compact_stats_insert
INSERT INTO jobqueue_minutestat (minute, span, queue, task_name, outcome, count, seconds,
                                 h00, h01, h02, h03, h04, h05, h06, h07, h08, h09, h10, h11, h12, h13, h14, h15)
SELECT TIMESTAMP('1970-01-01 00:00:00')
           + INTERVAL (FLOOR(TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', minute) / %(to_span)s)
                       * %(to_span)s) SECOND AS bucket,
       %(to_span)s, queue, task_name, outcome, sum(count), sum(seconds),
       sum(h00), sum(h01), sum(h02), sum(h03), sum(h04), sum(h05), sum(h06), sum(h07), sum(h08), sum(h09), sum(h10), sum(h11), sum(h12), sum(h13), sum(h14), sum(h15)
FROM jobqueue_minutestat
WHERE span = %(from_span)s AND minute < %(before)s
GROUP BY bucket, queue, task_name, outcome;

-- name: compact_stats_delete
DELETE FROM jobqueue_minutestat WHERE span = %(from_span)s AND minute < %(before)s;

-- name: in_transaction
-- Whether this connection is inside a transaction (a handler's raw BEGIN left open): asked
-- by runtime/cleanup.py after an attempt, on the driver's connection. MariaDB only.
SELECT @@in_transaction;

-- name: database_now
-- The clock every statement here compares times with (the statement's start, in UTC): the
-- test kit makes jobs due by it.
SELECT UTC_TIMESTAMP(6);
