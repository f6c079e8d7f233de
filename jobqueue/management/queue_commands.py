"""``manage.py jobs pause|resume|health``: queue controls and the health probe.

Argument parsing and the report only; the pause is :mod:`jobqueue.pauses`' and the findings
are :mod:`jobqueue.health`'s, the same as the admin's.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from django.core.management.base import BaseCommand

from jobqueue import conf
from jobqueue.console import health, overview
from jobqueue.store import pauses

HELP = {
    "pause": "pause queues: their jobs are still enqueued but no worker claims them, on any "
    "host, until they are resumed (jobs already running run on)",
    "resume": "resume paused queues: the workers that serve them claim their due jobs at once",
    "health": "exit 0 when healthy, 1 with one line per problem: a queue with due jobs that no "
    "live worker serves, a due job older than --max-wait; abandoned jobs waiting for an "
    "operator are a warning (a problem with --strict)",
}


def queue_name(value: str) -> str:
    if not value or len(value) > pauses.MAX_QUEUE_LENGTH:
        raise argparse.ArgumentTypeError(
            f"expected a queue name of 1 to {pauses.MAX_QUEUE_LENGTH} characters, got {value!r}"
        )
    return value


def seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected seconds (a number >= 0), got {value!r}")
    return number


def add_parsers(sub: Any) -> None:
    for action in ("pause", "resume"):
        parser = sub.add_parser(action, help=HELP[action], description=HELP[action] + ".")
        parser.add_argument(
            "queues", nargs="+", type=queue_name, metavar="QUEUE", help="queue names"
        )
    parser = sub.add_parser("health", help=HELP["health"], description=HELP["health"] + ".")
    parser.add_argument(
        "--max-wait",
        type=seconds,
        default=health.DEFAULT_MAX_WAIT,
        metavar="SECONDS",
        help="a due job that has waited longer is a problem (default: %(default)g)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="abandoned jobs waiting for an operator are a problem, not a warning",
    )
    parser.add_argument(
        "--json", action="store_true", dest="as_json", help="print JSON instead of lines"
    )


def pause(command: BaseCommand, queues: list[str]) -> None:
    _warn_unknown(command, queues)
    change = pauses.pause(queues, by=pauses.BY_COMMAND)
    for queue in change.changed:
        command.stdout.write(f'paused queue "{queue}": no worker claims its jobs until resumed')
    for queue in change.unchanged:
        command.stdout.write(f'queue "{queue}" was already paused')


def resume(command: BaseCommand, queues: list[str]) -> None:
    change = pauses.resume(queues)
    for queue in change.changed:
        command.stdout.write(f'resumed queue "{queue}": its workers claim its due jobs now')
    for queue in change.unchanged:
        command.stdout.write(f'queue "{queue}" was not paused')


def _warn_unknown(command: BaseCommand, queues: list[str]) -> None:
    """A queue with no jobs that the settings do not name may be a typo: pause it all the
    same (jobs may be enqueued to it later), but say so."""
    named = conf.get().named_queues
    known = {r.queue for r in overview.queue_rows()} | named
    for queue in queues:
        if queue not in known:
            command.stderr.write(
                f'queue "{queue}" has no jobs and no pool or route names it: pausing it '
                "all the same (is the name right?)"
            )


def check(command: BaseCommand, *, max_wait: float, strict: bool, as_json: bool) -> None:
    """Print the findings; raise SystemExit(1) if one of them makes the probe fail.

    Every finding is one line on stdout, whatever its level, so that a probe's log shows
    them all; the exit status alone says healthy (0) or not (1).
    """
    report = health.check(max_wait=max_wait, strict=strict)
    if as_json:
        command.stdout.write(json.dumps(report.as_dict(), indent=2))
    else:
        failing = set(map(id, report.failures))
        for finding in report.findings:
            level = "problem" if id(finding) in failing else finding.level
            command.stdout.write(f"{level}: {finding.message}")
        if report.healthy:
            command.stdout.write("healthy")
    if not report.healthy:
        raise SystemExit(1)
