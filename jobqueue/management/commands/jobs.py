"""``manage.py jobs``: operator commands over the job table."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

import jobqueue
from jobqueue.console import overview
from jobqueue.management import operator_commands, queue_commands
from jobqueue.store.jobs import Store
from jobqueue.tasks import unregistered


class Command(BaseCommand):
    help = "Inspect and maintain the job table."

    def get_version(self) -> str:
        return jobqueue.__version__

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        texts = {
            "queues": "per queue: the pool that serves it, and its jobs due now, scheduled, "
            "running, failed and abandoned, with how long the oldest due job has waited, and "
            "whether it is paused",
            "workers": "the live workers by pool, with the jobs each holds",
            "schedules": 'each JOBQUEUE["SCHEDULES"] entry: its next tick, its last tick with '
            "that run's job and status, and the ticks it skipped",
        }
        queues, workers, schedules = (
            sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
            for name, text in texts.items()
        )
        for parser_ in (queues, workers, schedules):
            parser_.add_argument(
                "--json", action="store_true", dest="as_json", help="print JSON instead of a table"
            )
        prune = 'delete the finished jobs older than JOBQUEUE["RETENTION"] says, now'
        sub.add_parser("prune", help=prune, description=prune[0].upper() + prune[1:] + ".")
        operator_commands.add_parsers(sub)
        queue_commands.add_parsers(sub)

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, f"_{action}")(**options)

    def _queues(self, *, as_json: bool = False, **options: Any) -> None:
        rows = overview.queue_rows()
        if as_json:
            self.stdout.write(json.dumps([r.as_dict() for r in rows], indent=2))
            return
        if not rows:
            self.stdout.write("(no jobs and no configured queues)")
            return
        header = (
            "queue",
            "pool",
            "due",
            "scheduled",
            "running",
            "failed",
            "abandoned",
            "oldest due",
            "paused",
        )
        table = [header] + [
            (
                r.queue,
                r.pool or "NO POOL",
                *(str(n) for n in (r.due, r.scheduled, r.running, r.failed, r.abandoned)),
                _age(r.oldest_due_seconds),
                "paused" if r.paused else "",
            )
            for r in rows
        ]
        self._table(table)
        for r in rows:
            if r.pool is None:
                self.stderr.write(
                    f'queue "{r.queue}" is served by no pool: its jobs will never run. List it '
                    'in a pool\'s queues, route it in JOBQUEUE["ROUTING"], or add a catch-all pool.'
                )
        self._unregistered(rows)

    def _unregistered(self, rows: list[overview.QueueRow]) -> None:
        """Name the tasks of pending jobs that no live worker has registered."""
        counts = unregistered.by_task(
            (r.queue, name, n) for r in rows for name, n in r.unregistered.items()
        )
        if not counts:
            return
        names = unregistered.name_counts(counts)
        self.stdout.write(f"\npending jobs of tasks no live worker has registered: {names}")
        if overview.live_workers().exists():
            self.stderr.write(unregistered.REGISTER_HINT)
        else:
            self.stderr.write("No worker is running: start one with manage.py runjobs.")

    def _workers(self, *, as_json: bool = False, **options: Any) -> None:
        rows = overview.worker_rows()
        if as_json:
            self.stdout.write(json.dumps([r.as_dict() for r in rows], indent=2))
            return
        if not rows:
            self.stdout.write("(no live workers)")
            return
        header = ("pool", "worker", "queues", "threads", "held", "last heartbeat")
        self._table(
            [header]
            + [
                (r.pool, r.id, r.queues, str(r.concurrency), str(r.held), r.last_heartbeat)
                for r in rows
            ]
        )

    def _schedules(self, *, as_json: bool = False, **options: Any) -> None:
        rows = overview.schedule_rows()
        if as_json:
            self.stdout.write(json.dumps([r.as_dict() for r in rows], indent=2))
            return
        if not rows:
            self.stdout.write('(no schedules: JOBQUEUE["SCHEDULES"] is empty)')
            return
        header = (
            "schedule",
            "task",
            "expression",
            "time zone",
            "next tick",
            "last tick",
            "last job",
            "skipped",
            "notes",
        )
        self._table(
            [header]
            + [
                (
                    r.name,
                    r.task or "-",
                    r.expression,
                    r.timezone or "-",
                    _moment(r.next_tick),
                    _moment(r.last_tick),
                    _job(r.last_job_id, r.last_job_status),
                    str(r.skipped),
                    ", ".join(r.notes),
                )
                for r in rows
            ]
        )
        if any(not r.in_settings for r in rows):
            self.stderr.write(
                'Schedules "not in settings" are rows left by entries since removed from '
                'JOBQUEUE["SCHEDULES"]: nothing ticks them.'
            )

    def _table(self, rows: Sequence[Sequence[str]]) -> None:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write(
                "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            )

    def _retry(self, **options: Any) -> None:
        operator_commands.run(self, "retry", options)

    def _discard(self, **options: Any) -> None:
        operator_commands.run(self, "discard", options)

    def _pause(self, *, queues: list[str], **options: Any) -> None:
        queue_commands.pause(self, queues)

    def _resume(self, *, queues: list[str], **options: Any) -> None:
        queue_commands.resume(self, queues)

    def _health(
        self, *, max_wait: float, strict: bool, as_json: bool = False, **options: Any
    ) -> None:
        queue_commands.check(self, max_wait=max_wait, strict=strict, as_json=as_json)

    def _prune(self, **options: Any) -> None:
        deleted = Store().prune()
        total = sum(deleted.values())
        detail = ", ".join(f"{n} {status}" for status, n in deleted.items() if n)
        self.stdout.write(f"pruned {total} job(s){': ' + detail if detail else ''}")


def _moment(moment: dt.datetime | None) -> str:
    return "-" if moment is None else moment.isoformat(timespec="seconds")


def _job(job_id: int | None, status: str | None) -> str:
    if job_id is None:
        return "-"
    # No status: retention pruned the job since.
    return f"{job_id} {status or 'pruned'}"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
