"""``manage.py demo``: migrate, enqueue a demo batch, run a worker, and show each job's life."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand

from jobqueue.models import Job
from jobqueue.runtime.worker import Worker
from shop import tasks

FINISHED = {"succeeded", "failed", "abandoned", "discarded"}


class Command(BaseCommand):
    help = "Run the jobqueue demo on this project's database (SQLite unless DATABASE_URL is set)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--timeout", type=float, default=60, help="give up after this long")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", verbosity=0)
        jobs = [
            tasks.send_order_confirmation.enqueue(1001),
            tasks.call_payment_webhook.enqueue(1001),
            tasks.import_broken_feed.enqueue("https://example.com/feed.xml"),
            tasks.rebuild_feed.enqueue(7),
        ]
        ids = [job.id for job in jobs]
        self.stdout.write(f"enqueued jobs {ids}; starting a worker with 4 slots\n")

        worker = Worker(shutdown_timeout=5)
        thread = threading.Thread(target=worker.run, name="demo-worker")
        thread.start()
        seen: dict[int, tuple[str, int]] = {}
        deadline = time.monotonic() + options["timeout"]
        try:
            while time.monotonic() < deadline and thread.is_alive():
                rows = list(Job.objects.filter(id__in=ids).order_by("id"))
                for job in rows:
                    state = (job.status, job.attempts)
                    if seen.get(job.id) != state:
                        seen[job.id] = state
                        self.stdout.write(
                            f"  job {job.id:<4} {job.task_name.split('.')[-1]:<24} "
                            f"{job.status:<10} attempt {job.attempts}/{job.max_attempts}"
                        )
                if all(job.status in FINISHED for job in rows):
                    break
                time.sleep(0.1)
        finally:
            worker.stop()
            thread.join()
        self._summary(ids)

    def _summary(self, ids: list[int]) -> None:
        self.stdout.write("\nwhere each job ended:")
        for job in Job.objects.filter(id__in=ids).order_by("id"):
            self.stdout.write(
                f"  #{job.id} {job.task_name}: {job.status}, {job.attempts} attempt(s)"
            )
            if job.result is not None:
                self.stdout.write(f"      result: {job.result!r}")
            for error in job.errors:
                self.stdout.write(
                    f"      attempt {error['attempt']} failed: {error['type']}: {error['message']}"
                )
