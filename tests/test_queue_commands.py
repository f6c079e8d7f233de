"""``manage.py jobs pause|resume|health``: queue controls and the health probe."""

import datetime as dt
import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from jobqueue.models import QueuePause
from jobqueue.models import Worker as WorkerRow
from tests.conftest import REPO
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db(transaction=True)


def jobs(*args):
    """``manage.py jobs ARGS``: (exit code, stdout, stderr)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("jobs", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit:
        code = exit.code
    return code, out.getvalue(), err.getvalue()


def live_worker(queues=None, excluded=(), *, pool="default", age=0.0):
    return WorkerRow.objects.create(
        id=f"host:{WorkerRow.objects.count() + 1}:x",
        hostname="host",
        pid=1,
        pool=pool,
        queues={"queues": queues, "excluded": list(excluded)},
        concurrency=4,
        last_heartbeat=timezone.now() - dt.timedelta(seconds=age),
    )


def test_pause_and_resume_say_what_they_did():
    JobFactory(queue="emails")
    code, out, err = jobs("pause", "emails")
    assert code == 0 and err == ""
    assert out == 'paused queue "emails": no worker claims its jobs until resumed\n'
    assert QueuePause.objects.get().paused_by == "manage.py jobs pause"
    assert jobs("pause", "emails")[1] == 'queue "emails" was already paused\n'
    code, out, _ = jobs("resume", "emails", "feeds")
    assert code == 0
    assert out.splitlines() == [
        'resumed queue "emails": its workers claim its due jobs now',
        'queue "feeds" was not paused',
    ]
    assert not QueuePause.objects.exists()


def test_pausing_a_queue_nothing_knows_of_warns_and_pauses_it_all_the_same():
    code, _, err = jobs("pause", "emials")
    assert code == 0 and QueuePause.objects.filter(queue="emials").exists()
    assert 'queue "emials" has no jobs and no pool or route names it' in err


def test_pause_needs_a_queue_name():
    with pytest.raises(CommandError, match="QUEUE"):
        call_command("jobs", "pause")
    with pytest.raises(CommandError, match="expected a queue name"):
        call_command("jobs", "resume", "x" * 101)


def test_jobs_queues_shows_a_paused_queue_even_with_no_jobs():
    jobs("pause", "quiet")
    JobFactory(queue="emails")
    _, out, _ = jobs("queues")
    header, *lines = out.splitlines()
    assert header.split()[-1] == "paused"
    rows = {line.split()[0]: line for line in lines if line.strip()}
    assert rows["quiet"].rstrip().endswith("paused")
    assert not rows["emails"].rstrip().endswith("paused")
    _, out, _ = jobs("queues", "--json")
    assert {r["queue"]: r["paused"] for r in json.loads(out)} == {
        "emails": False,
        "quiet": True,
    }


def test_health_fails_for_due_jobs_no_live_worker_serves_and_passes_once_one_does():
    JobFactory.create_batch(2, queue="emails")
    code, out, _ = jobs("health")
    assert code == 1
    [line] = out.splitlines()
    assert line.startswith('problem: queue "emails": 2 due job(s) and no live worker serves it')
    live_worker(queues=["feeds"])  # serves another queue only
    assert jobs("health")[0] == 1
    live_worker(queues=None, excluded=["emails"])  # every queue but this one
    assert jobs("health")[0] == 1
    live_worker(queues=None, age=10_000)  # its heartbeat is older than LEASE: dead
    assert jobs("health")[0] == 1
    live_worker(queues=["emails"])
    assert jobs("health") == (0, "healthy\n", "")


def test_health_healthy_with_nothing_due():
    JobFactory(queue="emails", run_at=timezone.now() + dt.timedelta(hours=1))
    assert jobs("health") == (0, "healthy\n", "")


def test_health_fails_when_the_oldest_due_job_waited_longer_than_max_wait():
    live_worker()
    JobFactory(queue="emails", run_at=timezone.now() - dt.timedelta(seconds=400))
    code, out, _ = jobs("health")
    assert code == 1
    [line] = out.splitlines()
    assert line.startswith('problem: queue "emails": the oldest of 1 due job(s) has waited 4')
    assert "more than --max-wait 300 s" in line
    assert jobs("health", "--max-wait", "600")[0] == 0
    code, out, _ = jobs("health", "--max-wait", "60")
    assert code == 1 and "more than --max-wait 60 s" in out


def test_health_reports_each_problem_on_its_own_line():
    JobFactory(queue="emails", run_at=timezone.now() - dt.timedelta(seconds=400))
    JobFactory(queue="feeds")
    code, out, _ = jobs("health")
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 3 and all(line.startswith("problem: ") for line in lines)
    assert [line.split('"')[1] for line in lines] == ["emails", "emails", "feeds"]


def test_abandoned_jobs_are_a_warning_and_a_problem_with_strict():
    JobFactory.create_batch(2, queue="payments", status="abandoned")
    code, out, _ = jobs("health")
    assert code == 0
    assert out.splitlines() == [
        'warning: queue "payments": 2 abandoned job(s) wait for an operator (retry or discard '
        "them: manage.py jobs retry --status abandoned --queue payments)",
        "healthy",
    ]
    code, out, _ = jobs("health", "--strict")
    assert code == 1 and out.startswith('problem: queue "payments": 2 abandoned')


def test_a_paused_queue_with_due_jobs_is_info_not_a_problem():
    JobFactory(queue="emails", run_at=timezone.now() - dt.timedelta(seconds=4000))
    jobs("pause", "emails")
    code, out, _ = jobs("health")
    assert code == 0
    info, healthy = out.splitlines()
    assert info.startswith('info: queue "emails" is paused by manage.py jobs pause since ')
    assert info.endswith("1 due job(s) wait for manage.py jobs resume") and healthy == "healthy"


def test_health_json(settings):
    settings.JOBQUEUE = {"POOLS": {"fast": {"queues": ["emails"]}}}  # no catch-all pool
    JobFactory(queue="feeds")
    JobFactory(queue="payments", status="abandoned")
    code, out, _ = jobs("health", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["healthy"] is False and report["strict"] is False
    assert [(f["level"], f["kind"], f["queue"], f["count"]) for f in report["findings"]] == [
        ("problem", "no_worker", "feeds", 1),
        ("warning", "abandoned", "payments", 1),
    ]
    assert "no pool serves it" in report["findings"][0]["message"]


def test_an_on_demand_pool_is_given_time_to_start_a_worker(settings):
    settings.JOBQUEUE = {"POOLS": {"default": {"queues": "*", "resident": False}}}
    JobFactory(queue="emails")
    assert jobs("health")[0] == 0
    JobFactory(queue="emails", run_at=timezone.now() - dt.timedelta(seconds=120))
    code, out, _ = jobs("health")
    assert code == 1 and "no live worker serves it" in out


@pytest.mark.parametrize("bad", ["-1", "soon", "nan"])
def test_max_wait_is_validated(bad):
    with pytest.raises(CommandError, match="expected seconds"):
        call_command("jobs", "health", "--max-wait", bad)


def test_manage_py_jobs_health_exit_codes(tmp_path):
    # The probe as Kubernetes or systemd runs it: a process, its exit status and its output.
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'health.sqlite3'}"}
    manage = [sys.executable, str(REPO / "testproject" / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, timeout=120)

    def health():
        return subprocess.run(
            [*manage, "jobs", "health"], env=env, capture_output=True, text=True, timeout=120
        )

    healthy = health()
    assert (healthy.returncode, healthy.stdout, healthy.stderr) == (0, "healthy\n", "")
    subprocess.run(
        [
            *manage,
            "shell",
            "-c",
            "from jobqueue.models import Job; Job.objects.create(task_name='x', queue='emails')",
        ],
        env=env,
        check=True,
        timeout=120,
    )
    failing = health()
    assert failing.returncode == 1, failing
    assert failing.stdout.startswith('problem: queue "emails": 1 due job(s) and no live worker')
    assert failing.stderr == ""
