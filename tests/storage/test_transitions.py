"""Every named statement that writes a job row, run on rows in every status, against
``states.TRANSITIONS``.

The moves are found by running each statement on a real database, never by reading its
SQL: rows are seeded in every status, with every field a WHERE may look at set so that it
could match (the worker's id, a token, a live or an expired lease, started or not, either
crash policy, crashes left or not), and a row whose status changed shows the move. A
statement that forgets its status guard moves a row it should have left alone, and fails
here. A new statement that writes ``jobqueue_job`` fails :func:`test_every_writer_has_a_case`
until it has a case below.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone

import jobqueue.sql
from jobqueue import conf, states
from jobqueue.exceptions import JobRunAborted
from jobqueue.models import Job
from jobqueue.sql import SUPPORTED_VENDORS, load
from jobqueue.sql.mysql import MySQLDialect
from jobqueue.store.jobs import ClaimedJob, ClaimScope, Store, success
from jobqueue.tasks.base import Call
from tests.testapp import tasks

WORKER = "web-1:1:transitions"
ERROR = {"type": "ValueError", "message": "boom", "traceback": "", "attempt": 1}
# A statement writes job rows if it updates or inserts into the table, whatever it sets:
# whether it can change a status is for running it to show.
WRITES_JOBS = re.compile(r'\b(?:UPDATE|INSERT\s+INTO|MERGE\s+INTO)\s+"?jobqueue_job\b', re.I)

Move = tuple[str, str]
P, R, S, F, A, D = (
    states.PENDING,
    states.RUNNING,
    states.SUCCEEDED,
    states.FAILED,
    states.ABANDONED,
    states.DISCARDED,
)


@dataclass(frozen=True)
class Case:
    """One way to run one writing statement, through the store as the code runs it."""

    name: str
    # The one statement that writes job rows in this case, per vendor.
    statement: dict[str, str]
    run: Callable[[Store, list[ClaimedJob]], Any]
    # The moves it makes on the seeded rows: checked exactly, so that a listed move in
    # TRANSITIONS that no statement makes any more is noticed too.
    moves: frozenset[Move]
    # Statements that write job rows but set no status, run after it in the same case (a
    # recovery's words, explain_recovered); each has a case of its own too, which shows
    # that it makes no move on any row.
    also: tuple[str, ...] = ()


def both(name: str) -> dict[str, str]:
    return {vendor: name for vendor in SUPPORTED_VENDORS}


def each(write: Callable[[Store, ClaimedJob], Any]) -> Callable[[Store, list[ClaimedJob]], None]:
    """Run a fenced write on every seeded row; the fence refusing a row is an outcome too."""

    def run(store: Store, jobs: list[ClaimedJob]) -> None:
        for job in jobs:
            with contextlib.suppress(JobRunAborted):
                write(store, job)

    return run


def tokens(jobs: list[ClaimedJob]) -> list[str]:
    return [job.token for job in jobs]


def explain_every_row(store: Store, jobs: list[ClaimedJob]) -> None:
    """explain_recovered on rows in every status, each with a crash entry for it to match."""
    Job.objects.update(errors=[{"type": "WorkerLost", "message": "", "attempt": 1}])
    words = [{"id": job.id, "message": CRASH} for job in jobs]
    assert store.queries.execute("explain_recovered", {"words": json.dumps(words)}) == len(jobs)


def without_insert_returning(enqueue: Callable[[], Any]) -> Any:
    """``enqueue()`` as on MySQL 8, which has no INSERT ... RETURNING (only MySQL's vendor
    asks)."""
    with mock.patch.object(MySQLDialect, "insert_returning", new=property(lambda self: False)):
        return enqueue()


# The scope of a writer statement that records and claims nothing.
NOTHING = ClaimScope(worker=WORKER, task_names=(), queues=None)
CRASH = "The worker stopped renewing its lease (test)."

CASES = [
    Case(
        "claim",
        both("claim"),
        # One for a free slot, the rest claimed ahead (as far as they may be held).
        lambda store, jobs: store.claim(
            worker="web-2:2:other", task_names=[tasks.add.name], queues=None, limit=1, ahead=99
        ),
        frozenset({(P, R)}),
    ),
    Case(
        "succeed",
        {"postgresql": "claim", "sqlite": "succeed_many", "mysql": "succeed_many"},
        lambda store, jobs: store.record(
            [success(job, None) for job in jobs], scope=NOTHING, limit=0
        ),
        frozenset({(R, S)}),
    ),
    Case(
        "record a held job's start",
        {"postgresql": "claim", "sqlite": "record_started", "mysql": "record_started"},
        lambda store, jobs: store.record([], scope=NOTHING, limit=0, started=jobs),
        frozenset(),
    ),
    Case(
        "retry",
        both("retry"),
        each(lambda store, job: store.retry(job, ERROR, 5, worker=WORKER)),
        frozenset({(R, P)}),
    ),
    Case(
        "fail",
        both("fail"),
        each(lambda store, job: store.fail(job, ERROR, worker=WORKER)),
        frozenset({(R, F)}),
    ),
    Case(
        "discard (the handler raised Discard)",
        both("discard"),
        each(lambda store, job: store.discard(job, ERROR, worker=WORKER)),
        frozenset({(R, D)}),
    ),
    Case(
        "snooze",
        both("snooze"),
        each(lambda store, job: store.snooze(job, 60, worker=WORKER)),
        frozenset({(R, P)}),
    ),
    Case(
        "save_step",
        both("save_step"),
        each(lambda store, job: store.save_step(job, "export", [1])),
        frozenset(),
    ),
    Case(
        "renew_leases",
        both("renew_leases"),
        lambda store, jobs: store.renew_leases(WORKER, tokens(jobs)),
        frozenset(),
    ),
    Case(
        "unclaim",
        both("unclaim"),
        lambda store, jobs: store.unclaim(WORKER, tokens(jobs)),
        frozenset({(R, P)}),
    ),
    Case(
        "recover expired leases",
        both("recover"),
        lambda store, jobs: store.rescue_expired(),
        frozenset({(R, P), (R, A)}),
        also=("explain_recovered",),
    ),
    Case(
        "a worker's recovery pass (rescue_check, then recover)",
        both("recover"),
        lambda store, jobs: store.rescue_pass(),
        frozenset({(R, P), (R, A)}),
        also=("explain_recovered",),
    ),
    Case(
        "recover a stopping worker's jobs",
        both("recover"),
        lambda store, jobs: store.release(WORKER, tokens(jobs), CRASH),
        frozenset({(R, P), (R, A)}),
        also=("explain_recovered",),
    ),
    Case(
        "recover a dead worker's jobs",
        both("recover"),
        lambda store, jobs: store.release_worker(WORKER, CRASH),
        frozenset({(R, P), (R, A)}),
        also=("explain_recovered",),
    ),
    Case(
        "explain_recovered on every row",
        both("explain_recovered"),
        lambda store, jobs: explain_every_row(store, jobs),
        frozenset(),
    ),
    Case(
        "operator_retry",
        both("operator_retry"),
        lambda store, jobs: store.retry_jobs([job.id for job in jobs]),
        frozenset((status, P) for status in states.RETRYABLE),
    ),
    Case(
        "operator_retry of a filter",
        both("operator_retry"),
        lambda store, jobs: store.retry_jobs(Job.objects.all()),
        frozenset((status, P) for status in states.RETRYABLE),
    ),
    Case(
        "operator_discard",
        both("operator_discard"),
        lambda store, jobs: store.discard_jobs([job.id for job in jobs]),
        frozenset((status, D) for status in states.DISCARDABLE),
    ),
    # Inserts: the new rows must be pending, the seeded ones untouched.
    Case(
        "enqueue one",
        both("enqueue_one"),
        lambda store, jobs: tasks.add.enqueue(1, 2),
        frozenset(),
    ),
    Case(
        "enqueue a batch with keys",
        both("enqueue"),
        lambda store, jobs: tasks.add.enqueue_many([Call((1, 2), {}, "k1"), (3, 4)]),
        frozenset(),
    ),
    Case(
        # MySQL 8 has no INSERT ... RETURNING: one insert per job (MariaDB made to take it).
        "enqueue a batch without INSERT ... RETURNING",
        {"postgresql": "enqueue", "sqlite": "enqueue", "mysql": "enqueue_one_plain"},
        lambda store, jobs: without_insert_returning(
            lambda: tasks.add.enqueue_many([Call((1, 2), {}, "k1"), (3, 4)])
        ),
        frozenset(),
    ),
    Case(
        "enqueue a batch without keys",
        {"postgresql": "enqueue_keyless", "sqlite": "enqueue", "mysql": "enqueue"},
        lambda store, jobs: tasks.add.enqueue_many([(1, 2), (3, 4)]),
        frozenset(),
    ),
]


class Recorded(dict[str, str]):
    """A vendor's statements that note which ones were looked up, i.e. run."""

    def __init__(self, statements: dict[str, str], used: list[str]) -> None:
        super().__init__(statements)
        self.used = used

    def __getitem__(self, name: str) -> str:
        self.used.append(name)
        return super().__getitem__(name)


def seed() -> list[Job]:
    """One row per status and per combination of what a statement's WHERE may test."""
    now = timezone.now()
    leases = (now + dt.timedelta(hours=1), now - dt.timedelta(seconds=5))  # live, expired
    rows = [
        Job(
            task_name=tasks.add.name,
            args=[1, 2],
            status=status,
            run_at=now - dt.timedelta(seconds=1),
            attempts=1,
            crashes=crashes,
            on_crash=on_crash,
            token=f"{n:032x}",
            worker=WORKER,
            lease_until=lease,
            started_at=now - dt.timedelta(seconds=10) if started else None,
            finished_at=None if status in states.UNFINISHED else now,
        )
        for n, (status, lease, started, on_crash, crashes) in enumerate(
            itertools.product(
                states.Status.values, leases, (True, False), ("retry", "park"), (0, 2)
            )
        )
    ]
    return Job.objects.bulk_create(rows)


def claimed(row: Job) -> ClaimedJob:
    """The row as a worker holding its token sees it."""
    assert row.token is not None
    return ClaimedJob(
        id=row.pk,
        task_name=row.task_name,
        queue=row.queue,
        priority=row.priority,
        args=row.args,
        kwargs=row.kwargs,
        attempt=row.attempts,
        max_attempts=row.max_attempts,
        crashes=row.crashes,
        token=row.token,
    )


def statuses() -> dict[int, str]:
    return dict(Job.objects.values_list("pk", "status"))


def writers(vendor: str) -> set[str]:
    return {name for name, sql in load(vendor).items() if WRITES_JOBS.search(sql)}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_statement_moves_jobs_only_as_transitions_allow(
    case: Case, vendor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert states.Status.values == list(states.TRANSITIONS)
    # MAX_CRASHES 3 (the default): the seeded rows with 2 crashes are parked by a crash.
    assert conf.get().max_crashes == 3
    seeded = seed()
    before = statuses()
    used: list[str] = []
    monkeypatch.setattr(jobqueue.sql, "load", lambda v: Recorded(load(v), used))
    store = Store()

    case.run(store, [claimed(row) for row in seeded])

    ran = {name for name in used if name in writers(vendor)}
    assert ran == {case.statement[vendor], *case.also}, f"{case.name} ran {sorted(set(used))}"
    after = statuses()
    moves = {(before[pk], after[pk]) for pk in before if after[pk] != before[pk]}
    illegal = sorted(move for move in moves if not states.can_transition(*move))
    assert not illegal, (
        f"{case.statement[vendor]} ({vendor}) moved jobs "
        + ", ".join(f"{a} -> {b}" for a, b in illegal)
        + ", which states.TRANSITIONS does not allow"
    )
    # Allowed moves, but not this statement's (a guard lost, a branch gone): say which.
    assert moves == case.moves, f"{case.name} ({vendor}) moved jobs {sorted(moves)}"
    born = {pk: status for pk, status in after.items() if pk not in before}
    assert set(born.values()) <= {states.PENDING}, f"{case.name} inserted {born}"


@pytest.mark.parametrize("vendor_file", SUPPORTED_VENDORS)
def test_every_writer_has_a_case(vendor_file: str) -> None:
    covered = {case.statement[vendor_file] for case in CASES}
    missing = writers(vendor_file) - covered
    assert not missing, (
        f"{vendor_file}.sql: {sorted(missing)} write job rows but no case in "
        f"{__name__} runs them: add one, with the moves they may make"
    )
    # The pattern still finds the statements it is here for.
    assert {"claim", "retry", "fail", "snooze", "unclaim", "recover"} <= writers(vendor_file)
    assert {"operator_retry", "operator_discard", "enqueue"} <= writers(vendor_file)
    # Nor more: the recovery pass's check and the reap delete worker rows only (a job names
    # its worker in a plain column, no foreign key that a delete could write through).
    assert not {"rescue_check", "reap_workers"} & writers(vendor_file)


def test_every_transition_is_made_by_some_statement() -> None:
    made = set().union(*(case.moves for case in CASES))
    allowed = {(a, b) for a, targets in states.TRANSITIONS.items() for b in targets}
    assert made == allowed


def test_the_operator_actions_take_what_states_says() -> None:
    # The admin's buttons and the commands read RETRYABLE and DISCARDABLE; the SQL spells
    # them out, and the cases above check that it takes exactly these.
    assert all(states.can_transition(status, states.PENDING) for status in states.RETRYABLE)
    assert all(states.can_transition(status, states.DISCARDED) for status in states.DISCARDABLE)
    assert states.SUCCEEDED not in states.RETRYABLE + states.DISCARDABLE
