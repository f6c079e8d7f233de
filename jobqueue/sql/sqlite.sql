-- Every hand-written SQLite statement of jobqueue, by name.
-- SQLite serves one host, so times come from the caller as %(now)s, %(fence)s (now plus
-- SAFETY_BUFFER), %(lease_until)s and %(run_at)s, in Django's stored datetime format.
-- Lists and batches arrive as JSON text and are read with json_each.

-- name: enqueue
-- Insert a batch of jobs of one task, all with the same options: the shared values come as
-- scalars, the per-job ones as one JSON array of [args, kwargs, idempotency key,
-- concurrency key, rate key] rows. A
-- row whose idempotency key an unfinished job already holds is skipped by the partial unique
-- index, never by a read-then-write.
-- ("WHERE true" keeps the parser from reading ON CONFLICT as a join constraint.)
-- trace_context is one value for the whole batch (the enqueue span's carrier, or NULL).
INSERT INTO jobqueue_job (
    task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts,
    crashes, on_crash, idempotency_key, last_error, errors, steps, enqueued_at, updated_at,
    trace_context, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_per,
    rate_burst
)
SELECT %(task_name)s, %(queue)s, %(priority)s, r.value -> 0, r.value -> 1, 'pending',
       %(run_at)s, 0, %(max_attempts)s, 0, %(on_crash)s, r.value ->> 2, '', '[]', '{}',
       %(now)s, %(now)s, json(%(trace_context)s), r.value ->> 3, %(concurrency_limit)s,
       r.value ->> 4, %(rate_limit)s, %(rate_per)s, %(rate_burst)s
FROM json_each(%(rows)s) AS r
WHERE true
ON CONFLICT DO NOTHING
RETURNING id, idempotency_key;

-- name: enqueue_one
-- The same for one job. json() stores the arguments minified, as the batch does.
INSERT INTO jobqueue_job (
    task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts,
    crashes, on_crash, idempotency_key, last_error, errors, steps, enqueued_at, updated_at,
    trace_context, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_per,
    rate_burst
)
VALUES (
    %(task_name)s, %(queue)s, %(priority)s, json(%(args)s), json(%(kwargs)s), 'pending',
    %(run_at)s, 0, %(max_attempts)s, 0, %(on_crash)s, %(idempotency_key)s, '', '[]', '{}',
    %(now)s, %(now)s, json(%(trace_context)s), %(concurrency_key)s, %(concurrency_limit)s,
    %(rate_key)s, %(rate_limit)s, %(rate_per)s, %(rate_burst)s
)
ON CONFLICT DO NOTHING
RETURNING id, idempotency_key;

-- name: claim
-- Claim due jobs of this worker's tasks and queues in one statement: %(limit)s for the slots
-- free now, and up to %(ahead)s more to hold until a slot frees, held only while a counted
-- crash would return them to pending (see the PostgreSQL statement). A write statement in
-- autocommit takes SQLite's write lock before it reads, waiting up to the connection's
-- timeout, so two workers never claim from the same snapshot.
-- A job for a free slot starts at once (started_at = now); a held one keeps started_at NULL
-- until the writer records its start (record_started), so that recovery can tell it from
-- one whose handler ran. RETURNING may name only the updated table here, so the last column
-- reads which it was back from started_at. (typeof, not IS NULL: SQLite 3.40 answers
-- "x IS NULL" with false for every row in the RETURNING of an UPDATE ... FROM.)
UPDATE jobqueue_job
SET status = 'running',
    token = lower(hex(randomblob(16))),
    lease_until = %(lease_until)s,
    worker = %(worker)s,
    attempts = attempts + 1,
    -- NULL, not left as it was: a retried job still has its previous attempt's start.
    started_at = CASE WHEN picked.n <= %(limit)s THEN %(now)s END,
    updated_at = %(now)s
FROM (
    -- A paused queue (a jobqueue_queuepause row) is left out, as in the PostgreSQL claim.
    WITH due AS (
        SELECT id, priority, run_at, on_crash, crashes
        FROM jobqueue_job
        WHERE status = 'pending'
          AND run_at <= %(now)s
          AND task_name IN (SELECT value FROM json_each(%(task_names)s))
          AND (%(all_queues)s OR queue IN (SELECT value FROM json_each(%(queues)s)))
          AND queue NOT IN (SELECT value FROM json_each(%(excluded)s))
          AND queue NOT IN (SELECT queue FROM jobqueue_queuepause)
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s + %(ahead)s
    ),
    numbered AS (
        SELECT id, row_number() OVER (ORDER BY priority DESC, run_at, id) AS n,
               on_crash = 'retry' AND crashes + 1 < %(max_crashes)s AS holdable
        FROM due
    )
    SELECT id, n
    FROM numbered
    WHERE n <= %(limit)s
       OR n < (
           -- The first job beyond the free slots that may not be held, if there is one:
           -- found once, not once per job.
           SELECT coalesce(min(n), %(limit)s + %(ahead)s + 1)
           FROM numbered
           WHERE n > %(limit)s AND NOT holdable
       )
) AS picked
WHERE jobqueue_job.id = picked.id
RETURNING id, task_name, queue, priority, args, kwargs, attempts, max_attempts, crashes,
          token, steps, typeof(started_at) = 'null' AS held,
          -- Seconds from due to this claim, for job_started's wait.
          (julianday(%(now)s) - julianday(run_at)) * 86400.0 AS waited, trace_context;

-- name: record_started
-- The starts of held jobs a slot has taken since the writer's last statement, recorded in
-- the same transaction as its successes and its claim. Fenced by token and status, not by
-- the lease: the attempt still owns the job, and a start recorded late only makes recovery
-- count a crash, which a started handler deserves.
UPDATE jobqueue_job
SET started_at = %(now)s
FROM (
    SELECT value ->> 'id' AS id, value ->> 'token' AS token FROM json_each(%(started)s)
) AS started
WHERE jobqueue_job.id = started.id AND jobqueue_job.token = started.token
  AND jobqueue_job.status = 'running';

-- name: next_due
-- Seconds until the earliest pending job of this worker's tasks and queues is due (0 or less
-- if one is due already), NULL if there is none: an idle worker sleeps until then.
SELECT (julianday(min(run_at)) - julianday(%(now)s)) * 86400.0
FROM jobqueue_job
WHERE status = 'pending'
  AND task_name IN (SELECT value FROM json_each(%(task_names)s))
  AND (%(all_queues)s OR queue IN (SELECT value FROM json_each(%(queues)s)))
  AND queue NOT IN (SELECT value FROM json_each(%(excluded)s))
  AND queue NOT IN (SELECT queue FROM jobqueue_queuepause);

-- name: count_due
-- How many jobs of these tasks and queues have been due since %(cutoff)s, counting no
-- further than %(limit)s: the supervisor starts that many on-demand workers at most.
SELECT count(*) FROM (
    SELECT 1
    FROM jobqueue_job
    WHERE status = 'pending'
      AND run_at <= %(cutoff)s
      AND task_name IN (SELECT value FROM json_each(%(task_names)s))
      AND (%(all_queues)s OR queue IN (SELECT value FROM json_each(%(queues)s)))
      AND queue NOT IN (SELECT value FROM json_each(%(excluded)s))
      AND queue NOT IN (SELECT queue FROM jobqueue_queuepause)
    LIMIT %(limit)s
) AS due;

-- name: succeed_many
-- The same write for several jobs in one statement (group commit), each row fenced alike;
-- the ids returned are the rows the fence matched. PostgreSQL does this inside its claim
-- statement; here, with no writing CTEs, the store runs it and the claim in one transaction.
UPDATE jobqueue_job
SET status = 'succeeded', result = done.result, lease_until = NULL,
    started_at = coalesce(started_at, %(now)s), finished_at = %(now)s, updated_at = %(now)s
FROM (
    SELECT value ->> 'id' AS id, value ->> 'token' AS token, value -> 'result' AS result
    FROM json_each(%(done)s)
) AS done
WHERE jobqueue_job.id = done.id AND jobqueue_job.token = done.token
  AND jobqueue_job.status = 'running' AND jobqueue_job.lease_until > %(fence)s
RETURNING jobqueue_job.id;

-- name: retry
-- Fenced: a failed attempt with attempts left goes back to pending after its backoff.
-- (started_at: a held job's start may not have been recorded yet; retry, fail and snooze
-- record it, so that the row says when the latest attempt started.)
UPDATE jobqueue_job
SET started_at = coalesce(started_at, %(now)s),
    status = 'pending', run_at = %(run_at)s, last_error = %(last_error)s,
    errors = json_insert(errors, '$[#]', json(%(error)s)),
    lease_until = NULL, token = NULL, worker = NULL, updated_at = %(now)s
WHERE id = %(id)s AND token = %(token)s AND status = 'running' AND lease_until > %(fence)s;

-- name: fail
-- Fenced: out of attempts, or a PermanentError. The row stays, with its errors.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, %(now)s),
    status = 'failed', last_error = %(last_error)s,
    errors = json_insert(errors, '$[#]', json(%(error)s)),
    lease_until = NULL, finished_at = %(now)s, updated_at = %(now)s
WHERE id = %(id)s AND token = %(token)s AND status = 'running' AND lease_until > %(fence)s;

-- name: discard
-- Fenced: the handler raised Discard, there is nothing left to do. As fail, but the job ends
-- discarded; its entry in errors says why.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, %(now)s),
    status = 'discarded', last_error = %(last_error)s,
    errors = json_insert(errors, '$[#]', json(%(error)s)),
    lease_until = NULL, finished_at = %(now)s, updated_at = %(now)s
WHERE id = %(id)s AND token = %(token)s AND status = 'running' AND lease_until > %(fence)s;

-- name: snooze
-- Fenced: back to pending later without counting the attempt.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, %(now)s),
    status = 'pending', run_at = %(run_at)s, attempts = attempts - 1,
    lease_until = NULL, token = NULL, worker = NULL, updated_at = %(now)s
WHERE id = %(id)s AND token = %(token)s AND status = 'running' AND lease_until > %(fence)s;

-- name: save_step
-- Fenced: record one finished step so a later attempt reuses its result.
UPDATE jobqueue_job
SET steps = json_set(steps, %(path)s, json(%(value)s))
WHERE id = %(id)s AND token = %(token)s AND status = 'running' AND lease_until > %(fence)s;

-- name: prune
-- Delete one batch of finished rows of one status that finished before %(cutoff)s.
DELETE FROM jobqueue_job
WHERE id IN (
    SELECT id FROM jobqueue_job
    WHERE status = %(status)s AND finished_at < %(cutoff)s
    LIMIT %(batch)s
);

-- name: register_worker
-- Insert or refresh this worker's row; a worker whose row was reaped while it was paused
-- comes back (its jobs, if rescued meanwhile, stay fenced off by their new tokens). The task
-- names it registered are written on every beat too, so a row re-inserted after a reap, or
-- one an older version wrote, soon says what this process claims; its resident memory too.
INSERT INTO jobqueue_worker (id, hostname, pid, pool, queues, tasks, concurrency, memory, started_at, last_heartbeat)
VALUES (%(worker)s, %(hostname)s, %(pid)s, %(pool)s, json(%(queues)s), json(%(tasks)s), %(concurrency)s, %(memory)s, %(now)s, %(now)s)
ON CONFLICT (id) DO UPDATE SET last_heartbeat = excluded.last_heartbeat, tasks = excluded.tasks, memory = excluded.memory;

-- name: deregister_worker
DELETE FROM jobqueue_worker WHERE id = %(worker)s;

-- name: renew_leases
-- One statement renews every lease this worker holds, each fenced by its token and by a
-- lease that still has SAFETY_BUFFER left; a job missing from the result has been lost.
UPDATE jobqueue_job
SET lease_until = %(lease_until)s
WHERE worker = %(worker)s AND status = 'running'
  AND token IN (SELECT value FROM json_each(%(tokens)s))
  AND lease_until > %(fence)s
RETURNING id;

-- name: held_jobs
-- Which of the jobs this worker holds (by id and claim token) are still its own: running
-- with the same token. A job missing was discarded (or taken over): its attempt is
-- cancelled. A read by primary key, for the cancel of a discarded job (SQLite has no
-- NOTIFY: the worker asks after another connection's commit, at most every 0.5 s).
SELECT id FROM jobqueue_job
WHERE id IN (SELECT value FROM json_each(%(ids)s))
  AND worker = %(worker)s AND status = 'running'
  AND token IN (SELECT value FROM json_each(%(tokens)s));

-- name: unclaim
-- Hand back jobs this worker claimed ahead and never started: pending again, as if never
-- claimed, with no attempt spent and no crash counted. Fenced like every worker write.
UPDATE jobqueue_job
SET status = 'pending', attempts = max(attempts - 1, 0), lease_until = NULL,
    token = NULL, worker = NULL, updated_at = %(now)s
WHERE worker = %(worker)s AND status = 'running'
  AND token IN (SELECT value FROM json_each(%(tokens)s))
  AND lease_until > %(fence)s
RETURNING id;

-- name: recover
-- Apply the crash policy to running jobs whose worker is gone: either every job whose lease
-- expired (%(expired)s), or the listed tokens of one worker that is shutting down. SQLite
-- runs one writer at a time, so the status guard alone keeps two recoveries apart.
-- A job whose handler started (started_at set) gets the crash policy: on_crash "retry"
-- returns it to pending without spending an attempt and counts a crash; "park", or the
-- MAX_CRASHES-th crash, parks it as abandoned for an operator. A job claimed ahead and never
-- started (started_at NULL: held in the worker's line) goes back to pending as unclaim
-- hands it back: no attempt spent, no crash counted, no error entry, last_error and run_at
-- as they were. RETURNING may name only the updated table, so its fifth column reads which
-- it was back from started_at, which this statement leaves as it is (with typeof: see the
-- claim).
-- A crash appends a WorkerLost entry holding the facts as fields, which only this statement
-- still sees (the worker's row, the lease it held); its words are rendered from them in
-- Python (jobqueue.explain), and explain_recovered writes them, in the same transaction, to
-- the entry's message and last_error. RETURNING's last column is that entry. Its times are
-- ISO 8601 with their offset, as PostgreSQL writes them: Django stores a datetime here as
-- UTC text with a space for the T.
UPDATE jobqueue_job
SET status = CASE WHEN lost.parks THEN 'abandoned' ELSE 'pending' END,
    crashes = jobqueue_job.crashes + lost.started,
    attempts = max(jobqueue_job.attempts - 1, 0),
    run_at = CASE WHEN lost.started THEN %(now)s ELSE jobqueue_job.run_at END,
    finished_at = CASE WHEN lost.parks THEN %(now)s END,
    lease_until = NULL,
    token = NULL,
    worker = CASE WHEN lost.parks THEN jobqueue_job.worker END,
    errors = CASE WHEN lost.started
                  THEN json_insert(jobqueue_job.errors, '$[#]', json_object(
                      'type', 'WorkerLost', 'message', '', 'traceback', '',
                      'attempt', jobqueue_job.attempts,
                      'at', replace(%(now)s, ' ', 'T') || '+00:00',
                      'worker', jobqueue_job.worker,
                      'reason', %(reason)s,
                      'host', lost.hostname, 'pid', lost.pid,
                      'last_heartbeat', replace(lost.last_heartbeat, ' ', 'T') || '+00:00',
                      'lease_until', replace(jobqueue_job.lease_until, ' ', 'T') || '+00:00',
                      'policy', jobqueue_job.on_crash, 'crashes', jobqueue_job.crashes + 1,
                      'max_crashes', %(max_crashes)s,
                      'outcome', CASE WHEN lost.parks THEN 'abandoned' ELSE 'pending' END))
                  ELSE jobqueue_job.errors
             END,
    updated_at = %(now)s
FROM (
    SELECT candidate.id,
           candidate.started_at IS NOT NULL AS started,
           candidate.started_at IS NOT NULL
           AND (candidate.on_crash = 'park' OR candidate.crashes + 1 >= %(max_crashes)s)
           AS parks,
           w.hostname, w.pid, w.last_heartbeat
    FROM jobqueue_job AS candidate
    LEFT JOIN jobqueue_worker AS w ON w.id = candidate.worker
    WHERE candidate.status = 'running'
      AND ((%(expired)s AND candidate.lease_until < %(now)s)
           OR (candidate.worker = %(worker)s
               AND (%(any_token)s
                    OR candidate.token IN (SELECT value FROM json_each(%(tokens)s)))))
) AS lost
WHERE jobqueue_job.id = lost.id AND jobqueue_job.status = 'running'
RETURNING id, task_name, queue, status, typeof(started_at) <> 'null',
          CASE WHEN typeof(started_at) <> 'null' THEN errors -> '$[#-1]' END;

-- name: explain_recovered
-- The words of the crashes recover just counted, rendered by jobqueue.explain from their
-- entries' fields: each becomes its entry's message and the job's last_error. Run in
-- recover's transaction, under the same write lock, so it meets the rows as recover left
-- them; it writes only the latest entry, and only if that is a crash's.
UPDATE jobqueue_job
SET last_error = words.message,
    errors = json_set(errors, '$[#-1].message', words.message)
FROM (
    SELECT value ->> 'id' AS id, value ->> 'message' AS message FROM json_each(%(words)s)
) AS words
WHERE jobqueue_job.id = words.id AND errors ->> '$[#-1].type' = 'WorkerLost';

-- name: reap_workers
-- Forget workers that have not renewed for a whole lease; their jobs are recovered above.
DELETE FROM jobqueue_worker WHERE last_heartbeat < %(cutoff)s;

-- name: rescue_check
-- Whether any running job's lease has expired (on the jobqueue_job_running_lease index).
-- SQLite has no writing CTEs: when none has, reap_workers follows it; when one has, the
-- worker recovers it first (recover still finds the dead worker's row for the crash's
-- entry) and then reaps, as rescue_expired and reap_workers do.
SELECT EXISTS (
    SELECT 1 FROM jobqueue_job
    WHERE status = 'running' AND lease_until < %(now)s
);

-- name: unregistered_pending
-- Pending jobs, per queue and task, of the tasks no live worker (a row renewed since
-- %(cutoff)s, a lease ago) has registered: no worker will ever claim them as things are.
-- The live workers' names are few, so they are gathered first; a row whose tasks are not
-- an array (tampered with) registers nothing. Run from a worker's maintenance timer and by
-- `jobs queues`, never on the claim path.
WITH live AS (
    SELECT DISTINCT name.value AS task_name
    FROM jobqueue_worker worker, json_each(worker.tasks) name
    WHERE worker.last_heartbeat > %(cutoff)s
      AND json_type(worker.tasks) = 'array'
)
SELECT job.queue, job.task_name, count(*)
FROM jobqueue_job job
WHERE job.status = 'pending'
  AND NOT EXISTS (SELECT 1 FROM live WHERE live.task_name = job.task_name)
GROUP BY job.queue, job.task_name
ORDER BY count(*) DESC, job.task_name, job.queue;


-- Operator side: Retry and Discard from the admin, `manage.py jobs` and scripts. {selection}
-- is replaced by a subquery of job ids (operator_ids below, or a Django filter compiled to
-- SQL), so a selection of any size is ONE statement, never a loop of saves.

-- name: operator_ids
-- The selection for an explicit list of job ids, given as JSON text.
SELECT value FROM json_each(%(ids)s);

-- name: operator_retry
-- failed, abandoned or discarded -> pending, due now, with a fresh budget: attempts and
-- crashes back to 0; errors, last_error and finished steps stay (the next attempt reuses the
-- steps). The guards sit in the UPDATE's own WHERE, evaluated under SQLite's write lock:
--  * a lease that has not run out means a worker may still be running the job (it renewed
--    it, or a discarded job's worker has not noticed yet): left alone, the live worker wins;
--  * a job whose idempotency key a newer unfinished job holds is left alone (the partial
--    unique index would refuse it anyway); of several selected jobs sharing a key only the
--    newest is retried, so the statement cannot collide with itself.
WITH selected(id) AS (
    {selection}
),
candidate AS (
    SELECT job.id,
           row_number() OVER (PARTITION BY job.idempotency_key ORDER BY job.id DESC) AS newest
    FROM jobqueue_job AS job
    WHERE job.id IN (SELECT id FROM selected)
      AND job.status IN ('failed', 'abandoned', 'discarded')
)
UPDATE jobqueue_job
SET status = 'pending', run_at = %(now)s, attempts = 0, crashes = 0, token = NULL,
    lease_until = NULL, worker = NULL, finished_at = NULL, updated_at = %(now)s
FROM candidate
WHERE jobqueue_job.id = candidate.id
  AND (jobqueue_job.idempotency_key IS NULL OR candidate.newest = 1)
  AND jobqueue_job.status IN ('failed', 'abandoned', 'discarded')
  AND (jobqueue_job.lease_until IS NULL OR jobqueue_job.lease_until < %(now)s)
  AND NOT EXISTS (
      SELECT 1 FROM jobqueue_job AS holder
      WHERE holder.idempotency_key = jobqueue_job.idempotency_key
        AND holder.status IN ('pending', 'running')
        AND holder.id <> jobqueue_job.id
  )
-- The queues, for the store to wake this process's workers at commit (there is no NOTIFY).
RETURNING id, queue;

-- name: operator_retry_skipped
-- Why each selected job operator_retry did not retry was left alone, counted by reason. Read
-- after the UPDATE, for the report only: the UPDATE made the decision.
WITH selected(id) AS (
    {selection}
)
SELECT CASE
           WHEN job.status NOT IN ('failed', 'abandoned', 'discarded') THEN job.status
           WHEN job.lease_until >= %(now)s THEN 'lease'
           WHEN EXISTS (
               SELECT 1 FROM jobqueue_job AS holder
               WHERE holder.idempotency_key = job.idempotency_key
                 AND holder.status IN ('pending', 'running')
                 AND holder.id <> job.id
           ) THEN 'key'
           ELSE 'changed'
       END,
       count(*)
FROM jobqueue_job AS job
WHERE job.id IN (SELECT id FROM selected)
  AND job.id NOT IN (SELECT value FROM json_each(%(done)s))
GROUP BY 1;

-- name: operator_discard
-- Any job but a succeeded (or already discarded) one -> discarded. Clearing the token fences
-- off a running job's worker: it sees the change at its next look after this commit
-- (held_jobs) and cancels the attempt (ctx.cancelled), and its outcome is refused. The
-- lease is kept, so that a Retry waits until it has run out and the old attempt cannot
-- still be running. Only a running job has a lease, so the lease returned
-- tells the store how many were running.
WITH selected(id) AS (
    {selection}
)
UPDATE jobqueue_job
SET status = 'discarded', token = NULL, finished_at = %(now)s, updated_at = %(now)s
WHERE id IN (SELECT id FROM selected)
  AND status IN ('pending', 'running', 'failed', 'abandoned')
RETURNING id, lease_until;

-- name: operator_discard_skipped
-- The status of each selected job operator_discard left alone, counted, for the report.
WITH selected(id) AS (
    {selection}
)
SELECT job.status, count(*)
FROM jobqueue_job AS job
WHERE job.id IN (SELECT id FROM selected)
  AND job.id NOT IN (SELECT value FROM json_each(%(done)s))
GROUP BY 1;

-- name: data_version
-- The watcher's question (runtime/watcher.py), on its own read-only connection: a number
-- that changes when another connection has committed to the file since this one last
-- asked. It reads no table.
PRAGMA data_version;

-- name: queue_gauges
-- The metrics' gauges per queue, each count stopping at %(cap)s rows: the queues found by
-- skipping through jobqueue_job_queue_due (one probe per queue, not a scan of the table),
-- then per queue a range of that index for each state, and its oldest due job (its first
-- entry). Seconds late from %(now)s. No estimate here: past the cap, counted exactly.
WITH RECURSIVE queues (name) AS (
    SELECT min(queue) FROM jobqueue_job
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobqueue_job j WHERE j.queue > queues.name)
    FROM queues WHERE queues.name IS NOT NULL
)
SELECT q.name,
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'pending' AND j.run_at <= %(now)s LIMIT %(cap)s)),
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'pending' AND j.run_at > %(now)s LIMIT %(cap)s)),
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'running' LIMIT %(cap)s)),
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'failed' LIMIT %(cap)s)),
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'abandoned' LIMIT %(cap)s)),
    (SELECT (julianday(%(now)s) - julianday(min(j.run_at))) * 86400.0 FROM jobqueue_job j
        WHERE j.queue = q.name AND j.status = 'pending' AND j.run_at <= %(now)s)
FROM queues q
WHERE q.name IS NOT NULL;

-- name: queue_state_estimate
-- One queue's jobs in one status with run_at in (after, before], counted: past the
-- gauges' cap, where PostgreSQL would estimate (SQLite keeps no statistics to ask).
SELECT count(*) FROM jobqueue_job
WHERE queue = %(queue)s AND status = %(status)s AND run_at <= %(before)s AND run_at > %(after)s;

-- name: stat_bucket
-- The start (epoch seconds) of the dashboard's bucket of %s seconds a stat row's minute falls in.
(CAST(strftime('%%s', minute) AS INTEGER) / %s) * %s

-- name: compact_stats_insert
-- The first half of compact_stats (see postgresql.sql), in one transaction with the second:
-- SQLite has one writer at a time, and a worker whose read is stale when it comes to write
-- gets SQLITE_BUSY rather than counting the rows twice.
INSERT INTO jobqueue_minutestat (minute, span, queue, task_name, outcome, count, seconds,
                                 h00, h01, h02, h03, h04, h05, h06, h07, h08, h09, h10, h11, h12, h13, h14, h15)
SELECT datetime((CAST(strftime('%%s', minute) AS INTEGER) / %(to_span)s) * %(to_span)s, 'unixepoch'),
       %(to_span)s, queue, task_name, outcome, sum(count), sum(seconds),
       sum(h00), sum(h01), sum(h02), sum(h03), sum(h04), sum(h05), sum(h06), sum(h07), sum(h08), sum(h09), sum(h10), sum(h11), sum(h12), sum(h13), sum(h14), sum(h15)
FROM jobqueue_minutestat
WHERE span = %(from_span)s AND minute < %(before)s
GROUP BY 1, queue, task_name, outcome;

-- name: compact_stats_delete
DELETE FROM jobqueue_minutestat WHERE span = %(from_span)s AND minute < %(before)s;
