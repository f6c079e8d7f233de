"""``manage.py jobs retry|discard``: the admin's two actions, for terminals and scripts.

Argument parsing and the report only; the guards are the store's, the same as the admin's.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db.models import QuerySet

from jobqueue import states
from jobqueue.models import Job
from jobqueue.store.jobs import Store
from jobqueue.store.operations import Action, Outcome, Selection

# A larger selection goes in batches of this many ids, one statement each, with progress:
# one statement over a million rows would hold a million row locks until it commits.
BATCH = 10_000

HELP = {
    "retry": "send failed, abandoned or discarded jobs back to pending, due now, with a fresh "
    "attempt budget (a job whose lease is still held, or whose idempotency key a newer "
    "unfinished job holds, is skipped)",
    "discard": "discard jobs in any status but succeeded; a running job's worker loses its "
    "fence and its outcome is discarded",
}


def job_id(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a job id (a positive integer), got {value!r}")
    return number


def add_parsers(sub: Any) -> None:
    for action in ("retry", "discard"):
        parser = sub.add_parser(action, help=HELP[action], description=HELP[action] + ".")
        parser.add_argument("ids", nargs="*", type=job_id, metavar="ID", help="job ids")
        parser.add_argument(
            "--status", choices=states.Status.values, help="only jobs in this status"
        )
        parser.add_argument("--queue", help="only jobs in this queue")
        parser.add_argument("--task", help="only jobs of this task (its full name)")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="report what would be done, and change nothing",
        )


def run(command: BaseCommand, action: Action, options: dict[str, Any]) -> None:
    ids: list[int] = options.get("ids") or []
    filters = {
        field: options[option]
        for option, field in (("status", "status"), ("queue", "queue"), ("task", "task_name"))
        if options.get(option)
    }
    if not ids and not filters:
        raise CommandError(
            f"say which jobs to {action}: give job ids, or --status, --queue or --task "
            "(combine them to narrow the selection)"
        )
    queryset = Job.objects.filter(**filters)
    if ids:
        queryset = queryset.filter(pk__in=ids)
    dry_run = bool(options.get("dry_run"))
    store = Store()
    operate = store.retry_jobs if action == "retry" else store.discard_jobs
    total = len(set(ids)) if ids and not filters else queryset.count()
    if total <= BATCH:
        selection: Selection = ids if ids and not filters else queryset
        outcome = operate(selection, dry_run=dry_run)
    else:
        outcome = _in_batches(command, action, queryset, total, dry_run)
    command.stdout.write(outcome.message())
    missing = _missing(ids)
    if missing:
        # What was done with the rest is said above; the exit status tells a script that
        # part of what it asked for was not there (a typo, or pruned since).
        shown = ", ".join(map(str, missing[:20])) + (", ..." if len(missing) > 20 else "")
        raise CommandError(
            f"{len(missing)} of the {len(set(ids))} job id(s) given do not exist: {shown}"
        )


def _missing(ids: list[int]) -> list[int]:
    """The ids given that name no job, in order."""
    wanted = sorted(set(ids))
    found: set[int] = set()
    for start in range(0, len(wanted), BATCH):
        chunk = wanted[start : start + BATCH]
        found.update(Job.objects.filter(pk__in=chunk).values_list("pk", flat=True))
    return [pk for pk in wanted if pk not in found]


def _in_batches(
    command: BaseCommand, action: Action, queryset: QuerySet[Job], total: int, dry_run: bool
) -> Outcome:
    """The selection in id order, one statement per batch of ids, with a progress line."""
    store = Store()
    operate = store.retry_jobs if action == "retry" else store.discard_jobs
    outcome = Outcome(action=action, dry_run=dry_run)
    last, seen = 0, 0
    tty = sys.stderr.isatty()
    while True:
        rest = queryset.filter(pk__gt=last).order_by("pk")
        bound = rest.values_list("pk", flat=True)[BATCH - 1 : BATCH].first()
        # The batch is the filter itself over an id range, compiled into the statement.
        batch = rest.filter(pk__lte=bound) if bound is not None else rest
        result = operate(batch, dry_run=dry_run)
        outcome = outcome.merge(result)
        seen = min(total, seen + len(result.done) + result.skipped_count)
        command.stderr.write(
            f"{action}: {seen:,} of {total:,} jobs ({seen * 100 // total}%)",
            ending="\r" if tty else "\n",
        )
        if bound is None:
            break
        last = bound
    if tty:
        command.stderr.write("")
    return outcome
