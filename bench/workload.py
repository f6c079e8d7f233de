"""What a workload is, and what every run of one shares.

A :class:`Workload` is one of W1-W14: its key, the databases it runs on, the systems of
``--systems`` that take part, and ``run(context)``, which gives its parts of the report:
rows of the systems' table (:class:`bench.report.Measured`), W7's counts
(:class:`bench.report.Counted`) or tables of its own (:class:`bench.report.Table`).
``bench/workloads.py`` lists them in the order they run; ``bench/cli.py`` runs those chosen.

The workloads of the systems' table (W1-W5, W7) measure one repetition at a time: a
:class:`Measure` gives one value per row for one system, and :func:`measured` runs it
``--repeat`` times on each system, the systems interleaved. Setting up a repetition
(emptying the tables, preloading jobs) is never timed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from bench.report import Counted, Measured, Row, Table, number, progress
from bench.serverlog import MariaDBLog, ServerLog
from bench.systems.base import System
from bench.systems.peers import Peer

T = TypeVar("T")
ATTEMPTS = 3  # per run of a workload on a system
EVERY_DATABASE = frozenset({"postgresql", "sqlite", "mysql"})
POSTGRESQL = frozenset({"postgresql"})
Part = Measured | Counted | Table  # what a workload adds to the report


class BenchError(Exception):
    """A workload did not do what it measures (a worker failed, jobs were left)."""


@dataclass(frozen=True)
class Measure:
    """One repetition on one system gives one value per row."""

    rows: tuple[Row, ...]
    once: Callable[[System], list[float]]
    runs_on: Callable[[System], bool] = lambda system: True


def applies(system: System, key: str, setting: str = "default") -> bool:
    return key not in system.skips and setting in system.drain_settings


@dataclass
class Context:
    """What a workload's run is given: the options, the systems set up (in --systems
    order), the server's statement log (None where it cannot be read) and the runs that
    were measured again after an error."""

    args: argparse.Namespace
    systems: list[System]
    vendor: str  # Django's: "postgresql", "sqlite" or "mysql"
    log: ServerLog | MariaDBLog | None
    retried: list[str] = field(default_factory=list)

    def again(self, what: str, block: Callable[[], T]) -> T:
        """``block``, run again after an error: the machine is shared, and a database
        restart by someone else must not end the run."""
        from django.db import connections

        for attempt in range(1, ATTEMPTS + 1):
            try:
                return block()
            except Exception as exc:
                if attempt == ATTEMPTS:
                    raise
                progress(f"{what} failed, measuring again in 10 s: {str(exc)[-500:]}")
                self.retried.append(what)
                connections.close_all()  # a connection the server dropped is not reopened
                time.sleep(10)
        raise AssertionError("unreachable")

    def peers(self, names: Iterable[str]) -> list[Peer]:
        """The peers of ``names`` that were set up."""
        wanted = set(names)
        return [s for s in self.systems if s.name in wanted and isinstance(s, Peer)]


Run = Callable[[Context], list[Part]]
TakesPart = Callable[[type[System]], bool]


def every_system(system: type[System]) -> bool:
    return True


def no_notes(systems: list[System]) -> list[str]:
    return []


@dataclass(frozen=True)
class Workload:
    """One workload of ``python bench/run.py``."""

    key: str  # "W1".."W14"
    run: Run
    databases: frozenset[str] = EVERY_DATABASE  # the vendors it runs on
    # The systems of --systems that take part. When only workloads with a table of their
    # own are chosen, only the systems they take are set up.
    takes_part: TakesPart = every_system
    own_table: bool = False  # tables of its own, not rows of the systems' table
    needs_jobqueue: bool = False  # it measures jobqueue: without it in --systems, no run
    # Measured again whole after an error; else its run retries each repetition on its own.
    again: bool = False
    churns: bool = False  # it churns tables that only autovacuum vacuums
    peer_notes: bool = False  # what the report says about each peer goes with its table
    notes: Callable[[list[System]], list[str]] = no_notes  # more notes, when it ran


def measured(context: Context, measure: Measure) -> list[Measured]:
    """``measure`` ``--repeat`` times on each system it runs on, interleaved, each
    repetition retried on its own; its rows of the systems' table."""
    results = [Measured(row) for row in measure.rows]
    first = measure.rows[0]
    for run in range(1, context.args.repeat + 1):
        for system in [s for s in context.systems if measure.runs_on(s)]:
            what = f"{first.key} {first.title} [{system.name}]"
            values = context.again(what, partial(measure.once, system))
            for result, value in zip(results, values, strict=True):
                result.samples.setdefault(system.name, []).append(value)
            shown = ", ".join(number(v, first.unit) for v in values)
            progress(f"{what} run {run}: {shown} {first.unit}")
    return results
