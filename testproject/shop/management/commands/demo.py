"""``manage.py demo``: the promises of jobqueue, one short story each, on a fresh database.

A worker of the ``default`` pool runs in this process, so the journal hears every
transition of its jobs through the signals; the jobs of stories 5 and 6 run in separate
``runjobs --pool killable`` processes, which the demo kills with SIGKILL mid-job.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from jobqueue import states
from jobqueue.models import Job
from jobqueue.store import explain
from jobqueue.store.jobs import Store
from shop import demokit, tasks
from shop.demokit import FINISHED, InProcessWorker, Journal, WorkerProcesses, wait_for


class Rollback(Exception):
    """Raised inside the transaction of story 4 to roll it back."""


class Command(BaseCommand):
    help = (
        "Show jobqueue's promises, one short story each, on a fresh SQLite file (or the "
        "database --database names), with a worker in this process and worker processes "
        "that the demo kills."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--database",
            metavar="URL",
            help="run on this database (a DATABASE_URL) instead of a fresh SQLite file",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=30,
            help="give up when one step waits longer than this (default: %(default)s s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not demokit.prepared():
            argv = ["demo", "--timeout", str(options["timeout"])]
            demokit.restart_on_fresh_database(options["database"], argv)
        begun = time.monotonic()
        self.timeout = options["timeout"]
        self.journal = Journal(self.stdout.write)
        self.jobs: list[int] = []
        call_command("migrate", verbosity=0)
        self.introduce()
        self.journal.connect()
        self.processes = WorkerProcesses(settings.DEMO_LOG)
        try:
            with InProcessWorker():
                self.a_job_succeeds()
                self.a_job_fails_twice_then_succeeds()
                self.a_job_fails_for_good()
                self.a_rolled_back_enqueue_leaves_nothing()
                self.a_killed_worker_s_job_is_recovered()
                self.a_parked_job_is_retried_by_an_operator()
                self.a_duplicate_returns_none()
        finally:
            self.processes.stop()
            self.journal.disconnect()
        self.summary()
        self.look_further(time.monotonic() - begun)

    # -- the stories --------------------------------------------------------------------

    def a_job_succeeds(self) -> None:
        self.journal.story(1, "A job succeeds")
        job = self.enqueue(tasks.send_order_confirmation, 1001)
        self.follow(job, FINISHED)

    def a_job_fails_twice_then_succeeds(self) -> None:
        self.journal.story(2, "A job fails twice, then succeeds (its backoff: 0.5 s, doubling)")
        job = self.enqueue(tasks.call_payment_webhook, 1001)
        self.follow(job, FINISHED)

    def a_job_fails_for_good(self) -> None:
        self.journal.story(3, "A job fails for good, and keeps its errors")
        job = self.enqueue(tasks.import_broken_feed, "https://example.com/feed.xml")
        self.follow(job, FINISHED)
        self.journal.say("its errors stay on the row (job.errors) until an operator acts:")
        for entry in Job.objects.get(pk=job.id).errors:
            self.journal.say(f"  attempt {entry['attempt']}: {entry['type']}: {entry['message']}")

    def a_rolled_back_enqueue_leaves_nothing(self) -> None:
        self.journal.story(4, "An enqueue inside a transaction that rolls back")
        before = Job.objects.count()
        try:
            with transaction.atomic():
                job = tasks.send_order_confirmation.enqueue(1002)
                self.journal.say(
                    f"inside transaction.atomic(): enqueued job #{job.id}, then an error"
                )
                raise Rollback
        except Rollback:
            pass
        after = Job.objects.count()
        self.journal.say(
            f"jobs in the table: {before} before, {after} after: nothing was enqueued, "
            "and no worker was told of it"
        )

    def a_killed_worker_s_job_is_recovered(self) -> None:
        self.journal.story(5, "A worker killed mid-job: its job is recovered, then finished")
        first = self.processes.start()
        job = self.enqueue(tasks.resize_photos, 42)
        self.kill_while_running(job, first)
        # No live worker holds it now: the lease runs out, and a worker (the one in this
        # process) recovers the job, by its task's policy: on_crash="retry".
        self.journal.follow(job.id, {states.PENDING}, self.timeout)
        second = self.processes.start()
        self.journal.say(f"a new runjobs --pool killable, pid {second.pid}, takes it")
        self.after_the_fact(job)

    def a_parked_job_is_retried_by_an_operator(self) -> None:
        self.journal.story(6, 'A parked job (on_crash="park"): an operator looks, then retries')
        worker = self.processes.live()
        job = self.enqueue(tasks.charge_card, 1001)
        self.kill_while_running(job, worker)
        self.journal.follow(job.id, {states.ABANDONED}, self.timeout)
        self.as_the_admin_shows_it(Job.objects.get(pk=job.id))
        # The admin's Retry action and ``manage.py jobs retry`` call this same method.
        outcome = Store().retry_jobs([job.id])
        self.journal.say(f"Retry (the admin's action): {outcome.message()}")
        replacement = self.processes.start()
        self.journal.say(f"a new runjobs --pool killable, pid {replacement.pid}, takes it")
        self.after_the_fact(job)

    def a_duplicate_returns_none(self) -> None:
        self.journal.story(7, "An idempotency key: a duplicate enqueue returns None")
        feed = tasks.rebuild_feed.using(idempotency_key="feed:7")
        job = feed.enqueue(7, seconds=0.2)
        self.journal.enqueued(job, "rebuild_feed(7) with idempotency_key 'feed:7'")
        self.jobs.append(job.id)
        duplicate = feed.enqueue(7, seconds=0.2)
        self.journal.say(f"the same again while #{job.id} is unfinished returned {duplicate!r}")
        self.follow(job, FINISHED)

    def as_the_admin_shows_it(self, row: Job) -> None:
        crash = demokit.latest_crash(row)
        say = self.journal.say
        say(f"as the admin's page of job #{row.id} shows it:")
        say(
            f"status {row.status}, attempts {row.attempts} / {row.max_attempts}, "
            f"crashes {row.crashes}, on_crash park; "
            f"errors: attempt {crash['attempt']} on {crash['worker']}, {crash['type']}",
            indent=5,
        )
        # last_error holds the same words as the entry: the store wrote them from its fields.
        say(f"last error, the entry's words (jobqueue.explain): {explain.message(crash)}", indent=5)

    # -- how the stories are told --------------------------------------------------------

    def enqueue(self, task: Any, *args: Any) -> Job:
        job = task.enqueue(*args)
        self.jobs.append(job.id)
        call = f"{task.name.rsplit('.', 1)[-1]}({', '.join(map(repr, args))})"
        self.journal.enqueued(job, call)
        return job

    def follow(self, job: Job, until: set[str]) -> None:
        self.journal.follow(job.id, until, self.timeout)

    def kill_while_running(self, job: Job, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL ``proc`` once its handler runs ``job``: the row says so, and whose it is."""
        row = wait_for(
            lambda: Job.objects.filter(pk=job.id, status=states.RUNNING).first(),
            f"job {job.id} to run",
            self.timeout,
        )
        if f":{proc.pid}:" not in row.worker:
            raise CommandError(f"job {job.id} went to {row.worker}, not to pid {proc.pid}")
        self.journal.note(
            job.id,
            row.status,
            f"attempt {row.attempts} of {row.max_attempts}, worker {row.worker}",
            row.started_at,
        )
        self.processes.kill(proc)
        self.journal.note(
            job.id, row.status, f"SIGKILL sent to pid {proc.pid}, its handler running"
        )

    def after_the_fact(self, job: Job) -> None:
        """A worker process's transitions, from the row: its start and its end."""
        row = wait_for(
            lambda: Job.objects.filter(pk=job.id, status__in=FINISHED).first(),
            f"job {job.id} to finish",
            self.timeout,
        )
        self.journal.note(
            row.id,
            states.RUNNING,
            f"attempt {row.attempts} of {row.max_attempts}, worker {row.worker}",
            row.started_at,
        )
        self.journal.note(
            row.id, row.status, self.journal.outcome(row, row.attempts), row.finished_at
        )

    # -- beginning and end -------------------------------------------------------------

    def introduce(self) -> None:
        self.stdout.write(f"jobqueue demo on {demokit.database_url()}")
        self.journal.say(
            "A worker of pool default runs in this process; the jobs of queues media and "
            "payments run in runjobs --pool killable processes. Times are seconds since each "
            "story began.",
            indent=0,
        )

    def summary(self) -> None:
        self.stdout.write("\nwhere each job ended:")
        for job in Job.objects.filter(id__in=self.jobs).order_by("id"):
            self.stdout.write(
                f"  #{job.id} {job.task_name}: {job.status}, {job.attempts} attempt(s)"
            )

    def look_further(self, seconds: float) -> None:
        python = demokit.shell_path(sys.executable)
        manage = demokit.shell_path(demokit.manage_py())
        prefix = f"DATABASE_URL={demokit.database_url()}"
        self.stdout.write(f"\ndone in {seconds:.1f} s; the log is {settings.DEMO_LOG}")
        self.stdout.write("look further, on the same database:")
        self.stdout.write(f"  {prefix} {python} {manage} jobs queues")
        self.stdout.write(f"  {prefix} {python} {manage} createsuperuser")
        self.stdout.write(f"  {prefix} {python} {manage} runserver")
        self.stdout.write("  then open http://127.0.0.1:8000/admin/jobqueue/job/")
