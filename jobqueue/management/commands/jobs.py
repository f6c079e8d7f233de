"""``manage.py jobs``: operator commands over the job table."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db.models import Count

from jobqueue import states
from jobqueue.models import Job, Worker
from jobqueue.store import Store


class Command(BaseCommand):
    help = "Inspect and maintain the job table."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("queues", help="jobs per queue and status")
        sub.add_parser("workers", help="live workers, their pool, queues and jobs held")
        sub.add_parser("prune", help='delete finished jobs older than JOBQUEUE["RETENTION"] now')

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, f"_{action}")()

    def _queues(self) -> None:
        columns = list(states.Status.values)
        counts: dict[str, dict[str, int]] = {}
        for row in Job.objects.order_by().values("queue", "status").annotate(n=Count("id")):
            counts.setdefault(row["queue"], {})[row["status"]] = row["n"]
        width = max([len("queue"), *map(len, counts)])
        self.stdout.write(f"{'queue':<{width}}  " + "  ".join(f"{c:>9}" for c in columns))
        for queue in sorted(counts):
            cells = "  ".join(f"{counts[queue].get(c, 0):>9}" for c in columns)
            self.stdout.write(f"{queue:<{width}}  {cells}")
        if not counts:
            self.stdout.write("(no jobs)")

    def _workers(self) -> None:
        held = dict(
            Job.objects.filter(status=states.RUNNING)
            .order_by()
            .values_list("worker")
            .annotate(n=Count("id"))
        )
        workers = list(Worker.objects.all())
        for w in workers:
            queues = w.queues.get("queues")
            served = "*" if queues is None else ",".join(queues)
            if w.queues.get("excluded"):
                served += " except " + ",".join(w.queues["excluded"])
            self.stdout.write(
                f"{w.id}  pool={w.pool}  queues={served}  concurrency={w.concurrency}  "
                f"held={held.get(w.id, 0)}  last_heartbeat={w.last_heartbeat.isoformat()}"
            )
        if not workers:
            self.stdout.write("(no live workers)")

    def _prune(self) -> None:
        deleted = Store().prune()
        total = sum(deleted.values())
        detail = ", ".join(f"{n} {status}" for status, n in deleted.items() if n)
        self.stdout.write(f"pruned {total} job(s){': ' + detail if detail else ''}")
