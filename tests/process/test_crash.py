"""Crash recovery with real processes and real signals; LEASE is a few seconds here."""

import re
import signal
import time

import pytest

from jobqueue.models import Job
from jobqueue.store.jobs import Store
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

LEASE = 3.0
RESCUE_INTERVAL = LEASE / 3
SHORT = {"LEASE": LEASE, "SAFETY_BUFFER": 0.5, "POLL_INTERVAL": 0.1}


def executions(label):
    return Execution.objects.filter(label=label)


def test_kill_9_with_retry_returns_the_job_and_another_worker_completes_it(
    start_worker, tmp_path, capsys
):
    gate = tmp_path / "gate"
    job = tasks.block_until.enqueue(str(gate))
    first = start_worker(settings=SHORT)
    wait_for(lambda: executions("block:start").exists(), timeout=30, message="the first run")
    first.kill()
    killed_at = time.monotonic()

    second = start_worker(settings=SHORT)
    wait_for(
        lambda: executions("block:start").count() == 2,
        timeout=LEASE + 10,
        message="a second worker to start the job",
    )
    recovered_after = time.monotonic() - killed_at
    # Recovery needs the lease to run out, then one rescue pass (plus the new process's start).
    assert recovered_after < LEASE + RESCUE_INTERVAL + 3
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.attempts, row.crashes) == ("running", 1, 1)
    assert f"pid {first.pid}" in row.last_error or "no longer registered" in row.last_error

    gate.touch()
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "succeeded",
        timeout=10,
        message="the job to succeed",
    )
    row = Job.objects.get(pk=job.pk)
    assert row.result == f"block done by {second.pid}"
    assert (row.attempts, row.crashes, row.errors[0]["type"]) == (1, 1, "WorkerLost")
    assert executions("block:end").get().pid == second.pid
    with capsys.disabled():
        print(
            f"\n[measured] kill -9 to running again: {recovered_after:.2f} s with LEASE={LEASE:g} s"
        )


def test_kill_9_with_park_abandons_and_never_runs_it_again(start_worker, tmp_path):
    job = tasks.park_block_until.enqueue(str(tmp_path / "never"))
    first = start_worker(settings=SHORT)
    wait_for(lambda: executions("park:start").exists(), timeout=30, message="the first run")
    first.kill()
    start_worker(settings=SHORT)
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "abandoned",
        timeout=LEASE + 10,
        message="the job to be parked",
    )
    row = Job.objects.get(pk=job.pk)
    assert (row.attempts, row.crashes) == (0, 1)
    assert 'on_crash="park"' in row.last_error and row.worker  # who held it stays visible
    # Give the live worker several rescue and claim passes: nothing starts the job again.
    time.sleep(2 * RESCUE_INTERVAL + 0.5)
    assert executions("park:start").count() == 1
    assert Job.objects.get(pk=job.pk).status == "abandoned"


def test_a_handler_that_kills_its_worker_is_parked_after_max_crashes(start_worker):
    job = tasks.kill_self.enqueue()
    deadline = time.monotonic() + 4 * (LEASE + RESCUE_INTERVAL + 3)
    worker = start_worker(settings={**SHORT, "MAX_CRASHES": 3})
    while Job.objects.get(pk=job.pk).status != "abandoned":
        assert time.monotonic() < deadline, "the job was never parked"
        if worker.proc.poll() is not None:  # it killed itself: a supervisor would restart it
            worker = start_worker(settings={**SHORT, "MAX_CRASHES": 3})
        time.sleep(0.1)
    row = Job.objects.get(pk=job.pk)
    assert (row.crashes, row.attempts) == (3, 0)
    assert "after 3 crashes (MAX_CRASHES)" in row.last_error
    assert executions("kill_self").count() == 3


def test_paused_worker_past_its_lease_cannot_overwrite_the_new_owner(start_worker, tmp_path):
    gate = tmp_path / "gate"
    job = tasks.block_until.enqueue(str(gate))
    stale = start_worker(settings=SHORT)
    wait_for(lambda: executions("block:start").exists(), timeout=30, message="the first run")
    stale.signal(signal.SIGSTOP)

    fresh = start_worker(settings=SHORT)
    wait_for(
        lambda: executions("block:start").count() == 2,
        timeout=LEASE + 10,
        message="the second worker to take the job over",
    )
    gate.touch()
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "succeeded",
        timeout=10,
        message="the new owner to finish",
    )
    settled = Job.objects.values().get(pk=job.pk)
    assert settled["result"] == f"block done by {fresh.pid}"

    stale.signal(signal.SIGCONT)
    wait_for(
        lambda: "outcome discarded" in stale.output(),
        timeout=15,
        message="the stale worker to discard its outcome",
    )
    time.sleep(RESCUE_INTERVAL + 0.2)  # let its heartbeat and rescue pass run as well
    assert Job.objects.values().get(pk=job.pk) == settled
    assert executions("block:end").count() == 2  # both handlers ran to the end...
    assert Job.objects.get(pk=job.pk).result == f"block done by {fresh.pid}"  # ...one result


def test_a_handler_slower_than_the_lease_keeps_its_job(start_worker):
    job = tasks.slow.enqueue(2.5 * LEASE)
    start_worker(settings=SHORT)
    start_worker(settings=SHORT)  # a competitor that would take a lapsed job
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "succeeded",
        timeout=4 * LEASE,
        interval=0.2,
        message="the slow job to finish",
    )
    row = Job.objects.get(pk=job.pk)
    assert (row.attempts, row.crashes) == (1, 0)
    assert executions("slow:start").count() == 1


def test_heartbeat_renews_while_the_handler_holds_a_long_transaction(start_worker, vendor):
    if vendor == "sqlite":
        pytest.skip("PostgreSQL and MySQL: on SQLite the held transaction holds the write lock")
    job = tasks.hold_transaction.enqueue(2 * LEASE)
    start_worker(settings=SHORT)
    start_worker(settings=SHORT)
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "succeeded",
        timeout=4 * LEASE,
        interval=0.2,
        message="the job to finish",
    )
    row = Job.objects.get(pk=job.pk)
    assert (row.attempts, row.crashes) == (1, 0)
    assert executions("hold_transaction").count() == 1


def test_a_job_killed_after_its_first_step_resumes_at_the_second(start_worker, tmp_path):
    gate = tmp_path / "gate"
    job = tasks.two_steps.enqueue(str(gate))
    first = start_worker(settings=SHORT)
    wait_for(
        lambda: Job.objects.get(pk=job.pk).steps == {"first": 1},
        timeout=30,
        message="the first step to be stored",
    )
    first.kill()
    gate.touch()
    start_worker(settings=SHORT)
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "succeeded",
        timeout=LEASE + 10,
        message="the job to resume and finish",
    )
    assert Job.objects.get(pk=job.pk).result == 3
    assert [e.label for e in Execution.objects.all()] == ["first", "second"]


@pytest.mark.usefixtures("postgresql_only")
def test_the_worker_survives_its_connections_being_cut(start_worker):
    from django.db import connection

    worker = start_worker(settings=SHORT)
    first = tasks.add.enqueue(1, 1)
    wait_for(
        lambda: Job.objects.get(pk=first.pk).status == "succeeded",
        timeout=30,
        message="the first job",
    )
    with connection.cursor() as cursor:  # what a database restart does to every session
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 2
    second = tasks.noop.enqueue("after the cut")
    wait_for(
        lambda: Job.objects.get(pk=second.pk).status == "succeeded",
        timeout=4 * LEASE,
        interval=0.2,
        message="a job enqueued after the cut to run",
    )
    assert worker.proc.poll() is None
    assert executions("after the cut").count() >= 1


def test_kill_9_returns_held_jobs_to_pending_and_leaves_park_jobs_alone(start_worker, tmp_path):
    gate = tmp_path / "gate"
    tasks.add.enqueue(1, 1)  # quick: the worker's jobs are short, so it claims ahead
    blocker = tasks.block_until.enqueue(str(gate))
    held = [tasks.add.enqueue(i, i) for i in range(2)]
    parked = tasks.park_block_until.enqueue(str(gate))
    worker = start_worker("--concurrency", "1", "--prefetch", "4", settings=SHORT)
    wait_for(lambda: executions("block:start").exists(), timeout=30, message="the blocker")
    wait_for(
        lambda: Job.objects.filter(pk__in=[j.pk for j in held], status="running").count() == 2,
        timeout=10,
        message="two jobs held",
    )
    # Held up to the first job a crash would park, which stays pending, unclaimed.
    assert Job.objects.get(pk=parked.pk).status == "pending"
    worker.kill()
    start_worker(settings={**SHORT, "POOLS": {"default": {"queues": "*", "prefetch": 0}}})
    gate.touch()
    wait_for(
        lambda: Job.objects.filter(status="succeeded").count() == 5,
        timeout=LEASE + 15,
        message="every job to succeed after recovery",
    )
    # Nothing lost and nothing parked: the running job came back with a crash counted, the
    # held ones, which never started, with none, and each ran once, on the second worker.
    row = Job.objects.get(pk=blocker.pk)
    assert (row.status, row.attempts, row.crashes) == ("succeeded", 1, 1)
    for job in held:
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.attempts, row.crashes, row.errors) == ("succeeded", 1, 0, [])
    row = Job.objects.get(pk=parked.pk)
    assert (row.status, row.attempts, row.crashes) == ("succeeded", 1, 0)
    assert executions("park:start").count() == 1


@pytest.mark.parametrize("recovery", ["supervisor", "lease expiry"])
def test_after_a_kill_9_only_the_jobs_whose_handler_started_count_a_crash(start_worker, recovery):
    # Many very short jobs, so that the worker claims ahead of its slot, and among them one
    # that SIGKILLs the worker once its start is on the row. With one slot, that job is then
    # the only one running: what the worker holds besides was claimed ahead, never started.
    jobs = [tasks.noop.enqueue(f"short-{i}") for i in range(40)]
    killer = tasks.kill_self_once_started.enqueue()
    jobs += [killer, *(tasks.noop.enqueue(f"short-{i}") for i in range(40, 100))]
    worker = start_worker("--concurrency", "1", settings=SHORT)
    assert worker.wait(30) == -signal.SIGKILL

    held = set(Job.objects.filter(status="running", started_at=None).values_list("pk", flat=True))
    assert held, "the worker held no job claimed ahead when it died"
    assert killer.pk not in held
    if recovery == "supervisor":
        # What the supervisor does when it reaps its dead child.
        [dead] = set(Job.objects.filter(status="running").values_list("worker", flat=True))
        Store().release_worker(dead, f"The worker process {worker.pid} died (SIGKILL).")
        for row in Job.objects.filter(pk__in=held):
            assert (row.status, row.attempts, row.crashes, row.errors) == ("pending", 0, 0, [])
        row = Job.objects.get(pk=killer.pk)
        assert (row.status, row.attempts, row.crashes) == ("pending", 0, 1)
    # (Otherwise the next worker rescues them once their leases have run out.)
    start_worker(settings=SHORT)
    wait_for(
        lambda: Job.objects.filter(status="succeeded").count() == len(jobs),
        timeout=LEASE + 30,
        interval=0.1,
        message="every job to succeed",
    )

    ran_on_the_dead_worker = set(
        Execution.objects.filter(pid=worker.pid).values_list("job_id", flat=True)
    )
    crashed = set(Job.objects.filter(crashes__gt=0).values_list("pk", flat=True))
    # The rule: every job whose crashes went up has a recorded start of its handler.
    assert killer.pk in crashed
    assert crashed <= ran_on_the_dead_worker, crashed - ran_on_the_dead_worker
    for row in Job.objects.filter(pk__in=held):
        assert (row.attempts, row.crashes, row.errors) == (1, 0, [])
        assert Execution.objects.filter(job_id=row.pk).count() == 1
    assert Job.objects.get(pk=killer.pk).result == "survived"


def test_under_the_supervisor_a_dead_workers_held_jobs_go_back_without_a_crash(start_worker):
    # As above, with the supervisor reaping its dead child and recovering its jobs at once:
    # the lease is long, so nothing else recovers them.
    jobs = [tasks.noop.enqueue(f"short-{i}") for i in range(40)]
    killer = tasks.kill_self_once_started.enqueue()
    jobs += [killer, *(tasks.noop.enqueue(f"short-{i}") for i in range(40, 100))]
    settings = {
        "LEASE": 120,
        "SAFETY_BUFFER": 5,
        "POLL_INTERVAL": 0.2,
        "POOLS": {"default": {"queues": "*", "concurrency": 1}},
    }
    supervisor = start_worker(supervisor=True, settings=settings)
    wait_for(
        lambda: Job.objects.filter(status="succeeded").count() == len(jobs),
        timeout=60,
        interval=0.1,
        message="every job to succeed",
    )
    dead = Execution.objects.filter(job_id=killer.pk).order_by("id").first().pid
    handed_back = re.search(
        r"(\d+) job\(s\) claimed ahead and never started went back to pending",
        supervisor.output(),
    )
    assert handed_back and int(handed_back.group(1)) >= 1, supervisor.output()
    ran_on_the_dead_worker = set(
        Execution.objects.filter(pid=dead).values_list("job_id", flat=True)
    )
    crashed = set(Job.objects.filter(crashes__gt=0).values_list("pk", flat=True))
    assert killer.pk in crashed
    assert crashed <= ran_on_the_dead_worker, crashed - ran_on_the_dead_worker
    assert Job.objects.get(pk=killer.pk).result == "survived"
