-- Every hand-written PostgreSQL statement of jobqueue, by name.
-- Times come from the database clock (now()), so workers on several hosts agree on leases.
-- Parameters use pyformat (%(name)s); a literal percent sign would be written %%.

-- name: enqueue
-- Insert a batch of jobs of one task, all with the same options: the shared values come as
-- scalars, the per-job ones as three JSON arrays of one length, read in step (ROWS FROM).
-- A row whose idempotency key an unfinished job already holds is skipped by the partial
-- unique index, never by a read-then-write.
-- pg_notify in RETURNING runs for inserted rows only, so the queue is notified exactly when
-- something was written. PostgreSQL folds a transaction's identical notifications into one
-- and delivers it only when the transaction commits (none on rollback): listeners hear of
-- the jobs when they become visible, with no extra round trip. (A CTE that notifies once
-- runs no faster for 10,000 rows, and takes the server ~50 us more to plan for a few.)
-- A batch in which no job has a key cannot conflict: jobqueue.sql derives enqueue_keyless,
-- this statement without ON CONFLICT, since a plain insert takes about a fifth less server
-- time for 10,000 rows than a speculative one.
-- trace_context is one value for the whole batch (the enqueue span's carrier, or NULL).
INSERT INTO jobqueue_job (
    task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts,
    crashes, on_crash, idempotency_key, last_error, errors, steps, enqueued_at, updated_at,
    trace_context, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_per,
    rate_burst
)
SELECT %(task_name)s, %(queue)s, %(priority)s, r.args, r.kwargs, 'pending',
       %(run_at)s::timestamptz, 0, %(max_attempts)s, 0, %(on_crash)s, r.idempotency_key, '',
       '[]', '{}', %(now)s::timestamptz, %(now)s::timestamptz, %(trace_context)s::jsonb,
       r.concurrency_key, %(concurrency_limit)s::integer, r.rate_key, %(rate_limit)s::integer,
       %(rate_per)s::float8, %(rate_burst)s::integer
FROM ROWS FROM (
    jsonb_array_elements(%(args)s::jsonb),
    jsonb_array_elements(%(kwargs)s::jsonb),
    jsonb_array_elements_text(%(keys)s::jsonb),
    jsonb_array_elements_text(%(concurrency_keys)s::jsonb),
    jsonb_array_elements_text(%(rate_keys)s::jsonb)
) AS r(args, kwargs, idempotency_key, concurrency_key, rate_key)
ON CONFLICT DO NOTHING
RETURNING id, idempotency_key, pg_notify(%(channel)s, %(queue)s);

-- name: enqueue_one
-- The same for one job (enqueue() of one call). Unprepared (Django's default), parsing and
-- planning are much of a single insert's server time, and VALUES takes a fifth less of it
-- than ROWS FROM.
INSERT INTO jobqueue_job (
    task_name, queue, priority, args, kwargs, status, run_at, attempts, max_attempts,
    crashes, on_crash, idempotency_key, last_error, errors, steps, enqueued_at, updated_at,
    trace_context, concurrency_key, concurrency_limit, rate_key, rate_limit, rate_per,
    rate_burst
)
VALUES (
    %(task_name)s, %(queue)s, %(priority)s, %(args)s::jsonb, %(kwargs)s::jsonb, 'pending',
    %(run_at)s::timestamptz, 0, %(max_attempts)s, 0, %(on_crash)s, %(idempotency_key)s, '',
    '[]', '{}', %(now)s::timestamptz, %(now)s::timestamptz, %(trace_context)s::jsonb,
    %(concurrency_key)s, %(concurrency_limit)s, %(rate_key)s, %(rate_limit)s, %(rate_per)s,
    %(rate_burst)s
)
ON CONFLICT DO NOTHING
RETURNING id, idempotency_key, pg_notify(%(channel)s, %(queue)s);

-- name: claim
-- Record the successes in %(done)s (fenced, like every worker write) and the starts of held
-- jobs in %(started)s, and claim due jobs of this worker's tasks and queues, in one
-- statement: the writer thread sends what came in while its last statement was out, and
-- gets the next jobs back with it. Any part may be empty. %(limit)s jobs are for slots free
-- now; up to %(ahead)s more are claimed ahead, to be held until a slot frees (see picked).
-- SKIP LOCKED lets concurrent workers pass over each other's rows instead of queueing
-- behind them; the ORDER BY matches the partial index jobqueue_job_claim. One row comes back
-- per claimed job (one with a NULL id if none was), each carrying the ids of the successes
-- the fence matched, and, on the row of a claim that asked for jobs and found none, what
-- next_due would say: an idle worker's look is then this one statement, not two.
-- A job claimed for a free slot starts at once: started_at = now(). A held one keeps
-- started_at NULL until a slot takes it and the writer's next statement records the start
-- (started below), so that recovery can tell a held job from one whose handler ran.
-- PostgreSQL lets no row be updated by two parts of one statement: a job that started and
-- succeeded since the last statement comes in done only, which records its start too.
WITH done AS (
    UPDATE jobqueue_job AS job
    SET status = 'succeeded', result = done.result, lease_until = NULL,
        started_at = coalesce(job.started_at, now()), finished_at = now(), updated_at = now()
    FROM jsonb_to_recordset(%(done)s::jsonb) AS done(id bigint, token text, result jsonb)
    -- The ids again, as an array: the rows are then found by primary key, never by a scan
    -- of every running row, whatever the statistics say about how many there are.
    WHERE job.id = ANY(%(done_ids)s::bigint[])
      AND job.id = done.id AND job.token = done.token AND job.status = 'running'
      AND job.lease_until > now() + make_interval(secs => %(buffer)s)
    RETURNING job.id
),
-- Fenced by token and status, not by the lease: the attempt still owns the job, and a start
-- recorded late only makes recovery count a crash, which a started handler deserves.
started AS (
    UPDATE jobqueue_job AS job
    SET started_at = now()
    FROM jsonb_to_recordset(%(started)s::jsonb) AS started(id bigint, token text)
    WHERE job.id = ANY(%(started_ids)s::bigint[])
      AND job.id = started.id AND job.token = started.token AND job.status = 'running'
),
-- A queue with a jobqueue_queuepause row is paused: the statement leaves its jobs out, so a
-- pause holds on every worker and host from its commit on, with no state in any worker.
-- The paused names are read once per statement (an InitPlan over a table of a handful of
-- rows) and filter the rows read in the index's order, as the excluded queues do. Written
-- as an array containment, not NOT EXISTS or queue <> ALL(...): the planner turns NOT
-- EXISTS into an anti-join that it hashes and sorts, and estimates "queue <> unknown" from
-- the queue column's statistics, as no row at all when one queue holds most jobs; either
-- way it would read every due row and sort them instead of the partial index
-- jobqueue_job_claim in its order up to the LIMIT. The containment has no statistics, so
-- the estimate stays that of the other conditions. The next due time below leaves paused
-- queues out too, or an idle worker would wake for their due jobs at once, again and
-- again. A job claimed ahead before the pause may still start (held at most HOLD_LIMIT,
-- and only for short jobs); a job already running runs on.
-- Flow control (jobqueue.tasks.limits): a job whose concurrency key has as many running
-- jobs as its limit, or whose rate key's next start is not yet allowed, is passed over, in
-- the index's order, so that it keeps its place and never holds back another key's jobs.
-- Running jobs are counted from the job rows (the partial index jobqueue_job_running_key),
-- never from a counter: a crash frees a slot when recovery sets the job back to pending, and
-- nothing can be released twice. The successes this statement records (those its fence
-- matched, read from done's RETURNING) are not counted.
running AS (
    SELECT r.concurrency_key AS key, count(*) AS n FROM jobqueue_job AS r
    WHERE r.status = 'running' AND r.concurrency_key IS NOT NULL
      AND r.id NOT IN (SELECT id FROM done)
    GROUP BY r.concurrency_key
),
full_keys AS (
    SELECT key, generate_series(1, n::integer) AS at_limit FROM running
),
due AS (
    SELECT j.id, j.priority, j.run_at, j.on_crash, j.crashes, j.concurrency_key,
           j.concurrency_limit, j.rate_key, j.rate_per / j.rate_limit AS rate_interval,
           j.rate_burst * j.rate_per / j.rate_limit AS allowance
    FROM jobqueue_job AS j
    WHERE j.status = 'pending'
      AND j.run_at <= now()
      AND j.task_name = ANY(%(task_names)s::text[])
      AND (%(all_queues)s OR j.queue = ANY(%(queues)s::text[]))
      AND j.queue <> ALL(%(excluded)s::text[])
      AND NOT ARRAY[j.queue::text] <@ ARRAY(SELECT queue::text FROM jobqueue_queuepause)
      AND (j.concurrency_key IS NULL
           OR (j.concurrency_key, j.concurrency_limit) NOT IN (SELECT key, at_limit FROM full_keys))
      AND (j.rate_key IS NULL OR j.rate_key NOT IN (
          -- The rate keys whose next start is ahead: one set, read once per statement.
          SELECT k.key FROM jobqueue_limitkey AS k
          WHERE k.tat - make_interval(secs => k.allowance) > now()
      ))
    ORDER BY j.priority DESC, j.run_at, j.id
    LIMIT %(limit)s + %(ahead)s
    FOR UPDATE OF j SKIP LOCKED
),
-- The limit keys of the jobs found, and their rows, locked: SKIP LOCKED passes over a key
-- whose jobs another claim is taking at this moment. A locked row is its latest version,
-- the other read of the table (seen) is this statement's snapshot: a key whose version
-- differs was claimed from since the snapshot, whose count of running jobs is then stale,
-- and its jobs wait for the next look. A key without a row gets one (created), and its jobs
-- are claimed from the next look on, under its lock.
flow_keys AS (
    SELECT concurrency_key AS key FROM due WHERE concurrency_key IS NOT NULL
    UNION
    SELECT rate_key FROM due WHERE rate_key IS NOT NULL
),
locked AS (
    SELECT k.key, k.tat, k.allowance, k.version
    FROM jobqueue_limitkey AS k
    WHERE k.key IN (SELECT key FROM flow_keys)
    FOR UPDATE SKIP LOCKED
),
usable AS (
    SELECT locked.key, locked.tat, locked.allowance
    FROM locked JOIN jobqueue_limitkey AS seen
        ON seen.key = locked.key AND seen.version = locked.version
),
created AS (
    INSERT INTO jobqueue_limitkey (key, tat, allowance, version)
    SELECT flow_keys.key, NULL, coalesce((
        SELECT max(due.allowance) FROM due WHERE due.rate_key = flow_keys.key
    ), 0), 0
    FROM flow_keys
    WHERE NOT EXISTS (SELECT FROM jobqueue_limitkey AS k WHERE k.key = flow_keys.key)
    ON CONFLICT DO NOTHING
),
-- Each concurrency key's running jobs, counted once per key; its first jobs in claim order
-- fill the free slots. A rate key's jobs in claim order start while GCRA allows: the m-th
-- may start if (m - 1) intervals fit between now and the key's tat less its burst.
room AS (
    SELECT d.concurrency_key AS key, coalesce(
        (SELECT n FROM running WHERE running.key = d.concurrency_key), 0) AS running
    FROM (SELECT DISTINCT concurrency_key FROM due WHERE concurrency_key IS NOT NULL) AS d
),
ranked AS (
    SELECT due.*,
           row_number() OVER (PARTITION BY concurrency_key ORDER BY priority DESC, run_at, id)
               AS concurrency_rank,
           row_number() OVER (PARTITION BY rate_key ORDER BY priority DESC, run_at, id)
               AS rate_rank
    FROM due
),
allowed AS (
    SELECT ranked.id, ranked.priority, ranked.run_at, ranked.on_crash, ranked.crashes,
           ranked.concurrency_key, ranked.rate_key, ranked.rate_interval, ranked.allowance
    FROM ranked
    LEFT JOIN room ON room.key = ranked.concurrency_key
    LEFT JOIN usable AS c ON c.key = ranked.concurrency_key
    LEFT JOIN usable AS rl ON rl.key = ranked.rate_key
    WHERE (ranked.concurrency_key IS NULL OR (
              c.key IS NOT NULL
              AND ranked.concurrency_rank <= ranked.concurrency_limit - room.running))
      AND (ranked.rate_key IS NULL OR (
              rl.key IS NOT NULL
              AND (ranked.rate_rank - 1) * ranked.rate_interval
                  <= rl.allowance
                     + extract(epoch FROM now() - greatest(coalesce(rl.tat, now()), now()))))
),
-- A job held unstarted goes back to pending without a crash if this worker dies. But its
-- handler may start, and kill the worker, before the writer records the start: then it too
-- goes back uncounted. So only a job that a counted crash would return to pending may be
-- held (on_crash "retry", with crashes left): a "park" job must never run twice.
-- Jobs are held in claim order up to the first that may not be; it and those after it are
-- left pending (their locks go with the statement) for the next claim to take first.
numbered AS (
    SELECT id, row_number() OVER (ORDER BY priority DESC, run_at, id) AS n,
           on_crash = 'retry' AND crashes + 1 < %(max_crashes)s AS holdable
    FROM allowed
),
picked AS (
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
),
claimed AS (
    UPDATE jobqueue_job AS job
    SET status = 'running',
        token = replace(gen_random_uuid()::text, '-', ''),
        lease_until = now() + make_interval(secs => %(lease)s),
        worker = %(worker)s,
        attempts = job.attempts + 1,
        -- NULL, not left as it was: a retried job still has its previous attempt's start.
        started_at = CASE WHEN picked.n <= %(limit)s THEN now() END,
        updated_at = now()
    FROM picked
    WHERE job.id = picked.id
    -- waited: seconds from due to this claim, for job_started's wait.
    RETURNING job.id, job.task_name, job.queue, job.priority, job.args, job.kwargs,
              job.attempts, job.max_attempts, job.crashes, job.token, job.steps,
              job.started_at IS NULL AS held,
              extract(epoch FROM now() - job.run_at)::float8 AS waited, job.trace_context
),
-- Each key a job was claimed for: its version goes up (see locked), and a rate key's tat
-- moves on by one interval per start, from now if it lay in the past; its allowance (the
-- burst's seconds, which the due filter and the wake-up read from the key) becomes that of
-- the jobs it started, so a burst changed by a deploy takes effect from the key's next start.
advanced AS (
    UPDATE jobqueue_limitkey AS k
    SET version = k.version + 1,
        tat = CASE WHEN used.starts > 0
                   THEN greatest(coalesce(k.tat, now()), now())
                        + make_interval(secs => used.spacing)
                   ELSE k.tat END,
        allowance = coalesce(used.allowance, k.allowance)
    FROM (
        SELECT key, sum(spacing) AS spacing, count(*) FILTER (WHERE spacing > 0) AS starts,
               max(allowance) AS allowance
        FROM (
            SELECT a.concurrency_key AS key, 0::float8 AS spacing, NULL::float8 AS allowance
            FROM allowed AS a JOIN picked USING (id) WHERE a.concurrency_key IS NOT NULL
            UNION ALL
            SELECT a.rate_key, a.rate_interval, a.allowance
            FROM allowed AS a JOIN picked USING (id) WHERE a.rate_key IS NOT NULL
        ) AS uses
        GROUP BY key
    ) AS used
    WHERE k.key = used.key
    RETURNING k.key, k.tat, k.allowance
),
-- When a rate key allows its next start, if one with a due job waiting (in this selection)
-- has it ahead: the keys' table (a row per key) is read, each key's first waiting job found
-- through the partial index jobqueue_job_pending_rate_key, never by a scan of the pending
-- rows. Read below only by a claim that took none, or fewer than it asked for (PostgreSQL runs
-- a CTE only when its rows are first read).
rate_wait AS (
    SELECT extract(epoch FROM min(k.tat - make_interval(secs => k.allowance)) - now())
               AS seconds
    FROM jobqueue_limitkey AS k
    CROSS JOIN LATERAL (
        SELECT 1
        FROM jobqueue_job AS j
        WHERE j.rate_key = k.key
          AND j.status = 'pending'
          AND j.run_at <= now()
          AND j.task_name = ANY(%(task_names)s::text[])
          AND (%(all_queues)s OR j.queue = ANY(%(queues)s::text[]))
          AND j.queue <> ALL(%(excluded)s::text[])
          AND NOT ARRAY[j.queue::text] <@ ARRAY(SELECT queue::text FROM jobqueue_queuepause)
        LIMIT 1
    ) AS waiting
    WHERE k.tat > now()
      AND k.tat - make_interval(secs => k.allowance) > now()
)
-- The next due job (next_due's answer) is read only when nothing was claimed: PostgreSQL
-- runs an uncorrelated subquery the first time its value is needed, so a claim that found
-- jobs never pays for it, and the claim's own plan is unchanged. It reads the statement's
-- snapshot, in which a due job that SKIP LOCKED passed over (another worker's claim was
-- taking it) is still pending: it then says 0, and the lookout looks again at once, as it
-- did when next_due ran before that claim committed. So it does when due found jobs that
-- flow control then left (a key's row just made, locked or changed by another claim): the
-- next look takes them. Beyond that (see next_due), a job held back by a full concurrency
-- key is left out (the worker that frees the slot claims it), and a rate-limited one is due
-- when its key allows the next start: a worker sleeps until then, never polls in between.
-- A claim that took jobs says it too (below), when it took fewer than it asked for.
SELECT (SELECT array_agg(id) FROM done),
       CASE WHEN %(limit)s + %(ahead)s = 0 THEN NULL
            WHEN claimed.id IS NULL THEN (
           CASE WHEN EXISTS (SELECT FROM due) THEN 0 ELSE least((
               SELECT extract(epoch FROM min(run_at) - now())
               FROM jobqueue_job
               WHERE status = 'pending'
                 AND task_name = ANY(%(task_names)s::text[])
                 AND (%(all_queues)s OR queue = ANY(%(queues)s::text[]))
                 AND queue <> ALL(%(excluded)s::text[])
                 AND NOT ARRAY[queue::text] <@ ARRAY(SELECT queue::text FROM jobqueue_queuepause)
                 AND (run_at > now() OR (concurrency_key IS NULL AND rate_key IS NULL))
           ), (
               SELECT seconds FROM rate_wait
           )) END)
            -- A claim that took fewer jobs than it asked for, while slots stay free: when a
            -- rate key allows its next start, so that a worker whose handlers run long
            -- still starts rate-limited jobs at their rate, not only as slots free.
            WHEN (SELECT count(*) FROM claimed) < %(limit)s + %(ahead)s THEN least((
               SELECT seconds FROM rate_wait
           ), (
               -- The keys this claim moved on: their new tat is not in the snapshot, and
               -- the jobs it took still look pending there.
               SELECT extract(epoch FROM min(a.tat - make_interval(secs => a.allowance)) - now())
               FROM advanced AS a
               CROSS JOIN LATERAL (
                   SELECT 1
                   FROM jobqueue_job AS j
                   WHERE j.rate_key = a.key
                     AND j.status = 'pending'
                     AND j.run_at <= now()
                     AND j.id NOT IN (SELECT id FROM claimed)
                     AND j.task_name = ANY(%(task_names)s::text[])
                     AND (%(all_queues)s OR j.queue = ANY(%(queues)s::text[]))
                     AND j.queue <> ALL(%(excluded)s::text[])
                   LIMIT 1
               ) AS waiting
           ))
       END,
       claimed.*
FROM (SELECT) AS one LEFT JOIN claimed ON true;

-- name: next_due
-- Seconds until the earliest pending job of this worker's tasks and queues is due (0 or less
-- if one is due already), NULL if there is none: an idle worker sleeps until then. A job
-- with a limit that is due already counts only when its rate key allows its start later:
-- one held back by a full concurrency key is claimed by the worker that frees the slot,
-- and one the claim could take now is found by the claim itself (which then says 0).
SELECT least((
    SELECT extract(epoch FROM min(run_at) - now())
    FROM jobqueue_job
    WHERE status = 'pending'
      AND task_name = ANY(%(task_names)s::text[])
      AND (%(all_queues)s OR queue = ANY(%(queues)s::text[]))
      AND queue <> ALL(%(excluded)s::text[])
      AND NOT ARRAY[queue::text] <@ ARRAY(SELECT queue::text FROM jobqueue_queuepause)
      AND (run_at > now() OR (concurrency_key IS NULL AND rate_key IS NULL))
), (
    -- The rate keys whose next allowed start is ahead, with a due job waiting for it: read
    -- from the keys' table (a row per key), each key's first waiting job found through the
    -- partial index jobqueue_job_pending_rate_key, never by a scan of the pending rows.
    SELECT extract(epoch FROM min(k.tat - make_interval(secs => k.allowance)) - now())
    FROM jobqueue_limitkey AS k
    CROSS JOIN LATERAL (
        SELECT 1
        FROM jobqueue_job AS j
        WHERE j.rate_key = k.key
          AND j.status = 'pending'
          AND j.run_at <= now()
          AND j.task_name = ANY(%(task_names)s::text[])
          AND (%(all_queues)s OR j.queue = ANY(%(queues)s::text[]))
          AND j.queue <> ALL(%(excluded)s::text[])
          AND NOT ARRAY[j.queue::text] <@ ARRAY(SELECT queue::text FROM jobqueue_queuepause)
        LIMIT 1
    ) AS waiting
    WHERE k.tat > now()
      AND k.tat - make_interval(secs => k.allowance) > now()
));

-- name: count_due
-- How many jobs of these tasks and queues have been due for %(grace)s s, counting no further
-- than %(limit)s: the supervisor starts that many on-demand workers at most.
SELECT count(*) FROM (
    SELECT 1
    FROM jobqueue_job
    WHERE status = 'pending'
      AND run_at <= now() - make_interval(secs => %(grace)s)
      AND task_name = ANY(%(task_names)s::text[])
      AND (%(all_queues)s OR queue = ANY(%(queues)s::text[]))
      AND queue <> ALL(%(excluded)s::text[])
      AND NOT ARRAY[queue::text] <@ ARRAY(SELECT queue::text FROM jobqueue_queuepause)
    LIMIT %(limit)s
) AS due;

-- name: retry
-- Fenced: a failed attempt with attempts left goes back to pending after its backoff.
-- (started_at: a held job's start may not have been recorded yet; retry, fail and snooze
-- record it, so that the row says when the latest attempt started.)
UPDATE jobqueue_job
SET started_at = coalesce(started_at, now()),
    status = 'pending', run_at = now() + make_interval(secs => %(delay)s),
    last_error = %(last_error)s, errors = errors || jsonb_build_array(%(error)s::jsonb),
    lease_until = NULL, token = NULL, worker = NULL, updated_at = now()
WHERE id = %(id)s AND token = %(token)s AND status = 'running'
  AND lease_until > now() + make_interval(secs => %(buffer)s);

-- name: fail
-- Fenced: out of attempts, or a PermanentError. The row stays, with its errors.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, now()),
    status = 'failed', last_error = %(last_error)s,
    errors = errors || jsonb_build_array(%(error)s::jsonb),
    lease_until = NULL, finished_at = now(), updated_at = now()
WHERE id = %(id)s AND token = %(token)s AND status = 'running'
  AND lease_until > now() + make_interval(secs => %(buffer)s);

-- name: discard
-- Fenced: the handler raised Discard, there is nothing left to do. As fail, but the job ends
-- discarded; its entry in errors says why.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, now()),
    status = 'discarded', last_error = %(last_error)s,
    errors = errors || jsonb_build_array(%(error)s::jsonb),
    lease_until = NULL, finished_at = now(), updated_at = now()
WHERE id = %(id)s AND token = %(token)s AND status = 'running'
  AND lease_until > now() + make_interval(secs => %(buffer)s);

-- name: snooze
-- Fenced: back to pending later without counting the attempt.
UPDATE jobqueue_job
SET started_at = coalesce(started_at, now()),
    status = 'pending', run_at = now() + make_interval(secs => %(delay)s),
    attempts = attempts - 1, lease_until = NULL, token = NULL, worker = NULL,
    updated_at = now()
WHERE id = %(id)s AND token = %(token)s AND status = 'running'
  AND lease_until > now() + make_interval(secs => %(buffer)s);

-- name: save_step
-- Fenced: record one finished step so a later attempt reuses its result.
UPDATE jobqueue_job
SET steps = jsonb_set(steps, ARRAY[%(name)s::text], %(value)s::jsonb)
WHERE id = %(id)s AND token = %(token)s AND status = 'running'
  AND lease_until > now() + make_interval(secs => %(buffer)s);

-- name: prune
-- Delete one batch of finished rows of one status older than %(age)s seconds.
DELETE FROM jobqueue_job
WHERE id IN (
    SELECT id FROM jobqueue_job
    WHERE status = %(status)s
      AND finished_at < now() - make_interval(secs => %(age)s)
    LIMIT %(batch)s
);

-- name: register_worker
-- Insert or refresh this worker's row; a worker whose row was reaped while it was paused
-- comes back (its jobs, if rescued meanwhile, stay fenced off by their new tokens). The task
-- names it registered are written on every beat too, so a row re-inserted after a reap, or
-- one an older version wrote, soon says what this process claims; its resident memory too.
INSERT INTO jobqueue_worker (id, hostname, pid, pool, queues, tasks, concurrency, memory, started_at, last_heartbeat)
VALUES (%(worker)s, %(hostname)s, %(pid)s, %(pool)s, %(queues)s::jsonb, %(tasks)s::jsonb, %(concurrency)s, %(memory)s, now(), now())
ON CONFLICT (id) DO UPDATE SET last_heartbeat = now(), tasks = EXCLUDED.tasks, memory = EXCLUDED.memory;

-- name: deregister_worker
DELETE FROM jobqueue_worker WHERE id = %(worker)s;

-- name: renew_leases
-- One statement renews every lease this worker holds, each fenced by its token and by a
-- lease that still has SAFETY_BUFFER left; a job missing from the result has been lost.
UPDATE jobqueue_job
SET lease_until = now() + make_interval(secs => %(lease)s)
WHERE worker = %(worker)s AND status = 'running'
  AND token = ANY(%(tokens)s::text[])
  AND lease_until > now() + make_interval(secs => %(buffer)s)
RETURNING id;

-- name: held_jobs
-- Which of the jobs this worker holds (by id and claim token) are still its own: running
-- with the same token. A job missing was discarded (or taken over): its attempt is
-- cancelled. A read by primary key, for the cancel of a discarded job.
SELECT id FROM jobqueue_job
WHERE id = ANY(%(ids)s::bigint[])
  AND worker = %(worker)s AND status = 'running'
  AND token = ANY(%(tokens)s::text[]);

-- name: unclaim
-- Hand back jobs this worker claimed ahead and never started: pending again, as if never
-- claimed, with no attempt spent and no crash counted. Fenced like every worker write.
UPDATE jobqueue_job
SET status = 'pending', attempts = greatest(attempts - 1, 0), lease_until = NULL,
    token = NULL, worker = NULL, updated_at = now()
WHERE worker = %(worker)s AND status = 'running'
  AND token = ANY(%(tokens)s::text[])
  AND lease_until > now() + make_interval(secs => %(buffer)s)
RETURNING id;

-- name: recover
-- Apply the crash policy to running jobs whose worker is gone: either every job whose lease
-- expired (%(expired)s), or the listed tokens of one worker that is shutting down. The
-- WHERE is re-checked on the locked row, so two workers recovering at once cannot both
-- apply it; SKIP LOCKED keeps them from waiting on each other.
-- A job whose handler started (started_at set) gets the crash policy: on_crash "retry"
-- returns it to pending without spending an attempt and counts a crash; "park", or the
-- MAX_CRASHES-th crash, parks it as abandoned for an operator. A job claimed ahead and never
-- started (started_at NULL: held in the worker's line) goes back to pending as unclaim
-- hands it back: no attempt spent, no crash counted, no error entry, last_error and run_at
-- as they were. RETURNING's fifth column says which it was.
-- A crash appends a WorkerLost entry holding the facts as fields, which only this statement
-- still sees (the worker's row, the lease it held); its words are rendered from them in
-- Python (jobqueue.explain), and explain_recovered writes them, in the same transaction, to
-- the entry's message and last_error. RETURNING's last column is that entry.
UPDATE jobqueue_job AS job
SET status = CASE WHEN lost.parks THEN 'abandoned' ELSE 'pending' END,
    crashes = job.crashes + CASE WHEN lost.started THEN 1 ELSE 0 END,
    attempts = greatest(job.attempts - 1, 0),
    run_at = CASE WHEN lost.started THEN now() ELSE job.run_at END,
    finished_at = CASE WHEN lost.parks THEN now() END,
    lease_until = NULL,
    token = NULL,
    worker = CASE WHEN lost.parks THEN job.worker END,
    errors = CASE WHEN lost.started
                  THEN job.errors || jsonb_build_array(jsonb_build_object(
                      'type', 'WorkerLost', 'message', '', 'traceback', '',
                      'attempt', job.attempts, 'at', now(), 'worker', job.worker,
                      'reason', %(reason)s::text,
                      'host', lost.hostname, 'pid', lost.pid,
                      'last_heartbeat', lost.last_heartbeat, 'lease_until', job.lease_until,
                      'policy', job.on_crash, 'crashes', job.crashes + 1,
                      'max_crashes', %(max_crashes)s::integer,
                      'outcome', CASE WHEN lost.parks THEN 'abandoned' ELSE 'pending' END))
                  ELSE job.errors
             END,
    updated_at = now()
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
      AND ((%(expired)s AND candidate.lease_until < now())
           OR (candidate.worker = %(worker)s
               AND (%(any_token)s OR candidate.token = ANY(%(tokens)s::text[]))))
    FOR UPDATE OF candidate SKIP LOCKED
) AS lost
WHERE job.id = lost.id AND job.status = 'running'
RETURNING job.id, job.task_name, job.queue, job.status, lost.started,
          CASE WHEN lost.started THEN job.errors -> -1 END;

-- name: explain_recovered
-- The words of the crashes recover just counted, rendered by jobqueue.explain from their
-- entries' fields: each becomes its entry's message and the job's last_error. Run in
-- recover's transaction, whose row locks still hold, so it meets the rows as recover left
-- them; it writes only the latest entry, and only if that is a crash's.
UPDATE jobqueue_job AS job
SET last_error = words.message,
    errors = jsonb_set(job.errors, '{-1,message}', to_jsonb(words.message))
FROM jsonb_to_recordset(%(words)s::jsonb) AS words(id bigint, message text)
WHERE job.id = words.id AND job.errors -> -1 ->> 'type' = 'WorkerLost';

-- name: reap_workers
-- Forget workers that have not renewed for a whole lease; their jobs are recovered above.
DELETE FROM jobqueue_worker
WHERE last_heartbeat < now() - make_interval(secs => %(lease)s);

-- name: rescue_check
-- An idle worker's recovery pass in one statement: whether any running job's lease has
-- expired (on the jobqueue_job_running_lease index), and, only when none has, reap_workers
-- in the same statement. When one has, the worker recovers it (recover) and then reaps, as
-- rescue_expired and reap_workers do: recover must still find a dead worker's row, whose
-- host, pid and last heartbeat go into the crash's entry. A DELETE in WITH runs whether or
-- not the query reads it; both parts see one snapshot and one now().
WITH expired AS MATERIALIZED (
    SELECT EXISTS (
        SELECT 1 FROM jobqueue_job
        WHERE status = 'running' AND lease_until < now()
    ) AS found
), reaped AS (
    DELETE FROM jobqueue_worker
    WHERE last_heartbeat < now() - make_interval(secs => %(lease)s)
      AND NOT (SELECT found FROM expired)
    RETURNING 1
)
SELECT found, (SELECT count(*) FROM reaped) FROM expired;

-- name: unregistered_pending
-- Pending jobs, per queue and task, of the tasks no live worker (a row renewed within a
-- lease) has registered: no worker will ever claim them as things are. The live workers'
-- names are few, so they are gathered first and the pending rows anti-joined to them by
-- hash; a row whose tasks are not an array (tampered with) registers nothing. Run from a
-- worker's maintenance timer and by `jobs queues`, never on the claim path.
WITH live AS (
    SELECT DISTINCT jsonb_array_elements_text(tasks) AS task_name
    FROM jobqueue_worker
    WHERE last_heartbeat > now() - make_interval(secs => %(lease)s)
      AND jsonb_typeof(tasks) = 'array'
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
-- The selection for an explicit list of job ids.
SELECT unnest(%(ids)s::bigint[]);

-- name: operator_retry
-- failed, abandoned or discarded -> pending, due now, with a fresh budget: attempts and
-- crashes back to 0; errors, last_error and finished steps stay (the next attempt reuses the
-- steps). The guards sit in the UPDATE's own WHERE, which PostgreSQL re-checks on the latest
-- version of a row another transaction changed meanwhile, so the database decides, not a page
-- an operator loaded a minute ago:
--  * a lease that has not run out means a worker may still be running the job (it renewed
--    it, or a discarded job's worker has not noticed yet): left alone, the live worker wins;
--  * a job whose idempotency key a newer unfinished job holds is left alone (the partial
--    unique index would refuse it anyway); of several selected jobs sharing a key only the
--    newest is retried, so the statement cannot collide with itself.
-- A concurrent enqueue of the same key can still collide; the store then runs it again.
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
UPDATE jobqueue_job AS job
SET status = 'pending', run_at = now(), attempts = 0, crashes = 0, token = NULL,
    lease_until = NULL, worker = NULL, finished_at = NULL, updated_at = now()
FROM candidate
WHERE job.id = candidate.id
  AND (job.idempotency_key IS NULL OR candidate.newest = 1)
  AND job.status IN ('failed', 'abandoned', 'discarded')
  AND (job.lease_until IS NULL OR job.lease_until < now())
  AND NOT EXISTS (
      SELECT 1 FROM jobqueue_job AS holder
      WHERE holder.idempotency_key = job.idempotency_key
        AND holder.status IN ('pending', 'running')
        AND holder.id <> job.id
  )
-- Each retried job's queue is notified as enqueue does: PostgreSQL folds the identical
-- notifications of a transaction into one and delivers it at commit only, so a dry run
-- (rolled back) or a caller's rollback wakes nobody.
RETURNING job.id, job.queue, pg_notify(%(channel)s, job.queue);

-- name: operator_retry_skipped
-- Why each selected job operator_retry did not retry was left alone, counted by reason. Read
-- after the UPDATE, for the report only: the UPDATE made the decision.
WITH selected(id) AS (
    {selection}
)
SELECT CASE
           WHEN job.status NOT IN ('failed', 'abandoned', 'discarded') THEN job.status
           WHEN job.lease_until >= now() THEN 'lease'
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
  AND job.id NOT IN (SELECT unnest(%(done)s::bigint[]))
GROUP BY 1;

-- name: operator_discard
-- Any job but a succeeded (or already discarded) one -> discarded. Clearing the token fences
-- off a running job's worker: it cancels the attempt (ctx.cancelled), and its outcome is
-- refused. The lease is kept, so that a Retry waits until it has run out and the
-- old attempt cannot still be running. Only a running job has a lease, so the lease returned
-- tells the store how many were running. Each running job's worker is told at once: a
-- notification 'cancel:<id>' (channel.CANCEL_PREFIX), which PostgreSQL delivers at commit
-- only, so a dry run or a rollback cancels nothing; the worker confirms it with
-- held_jobs before it cancels the attempt.
WITH selected(id) AS (
    {selection}
)
UPDATE jobqueue_job AS job
SET status = 'discarded', token = NULL, finished_at = now(), updated_at = now()
WHERE job.id IN (SELECT id FROM selected)
  AND job.status IN ('pending', 'running', 'failed', 'abandoned')
RETURNING job.id, job.lease_until,
    CASE WHEN job.lease_until IS NOT NULL
         THEN pg_notify(%(channel)s, %(cancel_prefix)s || job.id::text) END;

-- name: operator_discard_skipped
-- The status of each selected job operator_discard left alone, counted, for the report.
WITH selected(id) AS (
    {selection}
)
SELECT job.status, count(*)
FROM jobqueue_job AS job
WHERE job.id IN (SELECT id FROM selected)
  AND job.id NOT IN (SELECT unnest(%(done)s::bigint[]))
GROUP BY 1;

-- name: database_now
-- The clock every statement here compares times with (inside a transaction, its start):
-- the test kit makes jobs due by it. SQLite's statements take the caller's clock instead.
SELECT now();

-- name: estimated_rows
-- The planner's estimate of a table's rows (-1 before it was ever vacuumed or analysed):
-- the admin counts a large unfiltered changelist by it instead of a count(*) of every row.
SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%(table)s);

-- name: pending_estimate
-- The planner's belief of how many jobs are pending, from the table's statistics: an
-- EXPLAIN, no rows read. A claim planned on statistics that know of a handful of pending
-- jobs scans and sorts every pending row instead of reading the head of jobqueue_job_claim.
EXPLAIN (FORMAT JSON) SELECT 1 FROM jobqueue_job WHERE status = 'pending';

-- name: analyze_jobs
-- Fresh statistics of the job table (a sample of its rows, not a scan), so that the claim's
-- plan knows of the pending jobs a bulk enqueue just added.
ANALYZE jobqueue_job;

-- name: listener_backend_pid
-- The server process behind the listener's connection. On a direct connection it is the pid
-- the server announced at login (psycopg's info.backend_pid); a pooler such as PgBouncer
-- announces its own key instead, so a mismatch means a pooler is in between.
SELECT pg_backend_pid();

-- name: listener_probe
-- Sent from a second connection to the channel the listener alone listens on: whether it
-- arrives tells a session-mode pooler (LISTEN works) from a transaction-mode one (it does not).
SELECT pg_notify(%(channel)s, '');

-- name: queue_gauges
-- The metrics' gauges per queue, each count stopping at %(cap)s rows: the queues found by
-- skipping through jobqueue_job_queue_due (one probe per queue, not a scan of the table),
-- then per queue a range of that index for each state, and its oldest due job (its first
-- entry). Seconds late from the database clock.
WITH RECURSIVE queues (name) AS (
    SELECT min(queue) FROM jobqueue_job
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobqueue_job j WHERE j.queue > queues.name)
    FROM queues WHERE queues.name IS NOT NULL
)
SELECT q.name,
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'pending' AND j.run_at <= now() LIMIT %(cap)s) AS c),
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'pending' AND j.run_at > now() LIMIT %(cap)s) AS c),
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'running' LIMIT %(cap)s) AS c),
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'failed' LIMIT %(cap)s) AS c),
    (SELECT count(*) FROM (SELECT 1 FROM jobqueue_job j WHERE j.queue = q.name
        AND j.status = 'abandoned' LIMIT %(cap)s) AS c),
    (SELECT extract(epoch FROM now() - min(j.run_at)) FROM jobqueue_job j
        WHERE j.queue = q.name AND j.status = 'pending' AND j.run_at <= now())
FROM queues q
WHERE q.name IS NOT NULL;

-- name: without_jit
-- For the rest of this transaction: no JIT compilation. queue_gauges reads a few thousand
-- index entries at most, but its subqueries' estimates add up past jit_above_cost, and
-- compiling it took longer (0.7 s) than running it.
SET LOCAL jit = off;

-- name: queue_state_estimate
-- The planner's estimate of one queue's jobs in one status with run_at in (after, before]:
-- an EXPLAIN, no rows read. For a count past the gauges' cap.
EXPLAIN (FORMAT JSON) SELECT 1 FROM jobqueue_job
WHERE queue = %(queue)s AND status = %(status)s AND run_at <= %(before)s AND run_at > %(after)s;

-- name: notify_queues
-- Wake the workers that serve these queues, as an enqueue does (the payload is a queue
-- name): a resumed queue's due jobs are claimed at once, not at the next safety poll.
-- Delivered at commit, so a resume rolled back wakes nobody.
SELECT pg_notify(%(channel)s, queue) FROM unnest(%(queues)s::text[]) AS queue;

-- name: stat_bucket
-- The start (epoch seconds) of the dashboard's bucket of %s seconds a stat row's minute falls in.
(floor(extract(epoch FROM minute) / %s) * %s)::bigint

-- name: compact_stats
-- Merge the dashboard's stat rows of span %(from_span)s seconds before %(before)s (a window
-- boundary) into one row per window of %(to_span)s seconds, queue, task and outcome, summed
-- over workers: the week's chart reads a few thousand rows instead of a row per worker and
-- minute. One statement: a second worker compacting at the same time finds the rows gone
-- once the first commits (its DELETE skips them), so nothing is counted twice.
WITH gone AS (
    DELETE FROM jobqueue_minutestat
    WHERE span = %(from_span)s AND minute < %(before)s
    RETURNING minute, queue, task_name, outcome, count, seconds,
              h00, h01, h02, h03, h04, h05, h06, h07, h08, h09, h10, h11, h12, h13, h14, h15
)
INSERT INTO jobqueue_minutestat (minute, span, queue, task_name, outcome, count, seconds,
                                 h00, h01, h02, h03, h04, h05, h06, h07, h08, h09, h10, h11, h12, h13, h14, h15)
SELECT to_timestamp(floor(extract(epoch FROM minute) / %(to_span)s) * %(to_span)s), %(to_span)s,
       queue, task_name, outcome, sum(count), sum(seconds),
       sum(h00), sum(h01), sum(h02), sum(h03), sum(h04), sum(h05), sum(h06), sum(h07), sum(h08), sum(h09), sum(h10), sum(h11), sum(h12), sum(h13), sum(h14), sum(h15)
FROM gone
GROUP BY 1, queue, task_name, outcome;
