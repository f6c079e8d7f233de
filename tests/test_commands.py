"""The management commands: thin argument parsing over the runtime and the store."""

import datetime as dt
import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from tests.conftest import REPO
from tests.factories import FinishedJobFactory, JobFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_runjobs_burst_runs_what_is_due():
    job = tasks.add.enqueue(4, 5)
    run("runjobs", "--pool", "default", "--burst", "--concurrency", "2")
    assert Job.objects.get(pk=job.pk).result == 9


def test_runjobs_queue_option_limits_what_it_claims():
    email = tasks.send_email.enqueue("ada@example.com")
    other = tasks.add.enqueue(1, 1)
    run("runjobs", "--pool", "default", "--burst", "--queue", "emails")
    assert Job.objects.get(pk=email.pk).status == "succeeded"
    assert Job.objects.get(pk=other.pk).status == "pending"
    run("runjobs", "--pool", "default", "--burst", "--exclude-queue", "default")
    assert Job.objects.get(pk=other.pk).status == "pending"


def test_runjobs_rejects_an_unknown_pool():
    with pytest.raises(CommandError, match="--pool 'fast' is not in"):
        run("runjobs", "--pool", "fast")


def test_runjobs_queue_options_need_a_pool():
    with pytest.raises(CommandError, match="--queue needs --pool"):
        run("runjobs", "--queue", "emails")


@pytest.mark.parametrize(
    "args",
    [
        ["--concurrency", "0"],
        ["--shutdown-timeout", "-1"],
        ["--max-memory", "lots"],
        ["--max-memory", ""],
        ["--shutdown-timeout", "nan"],
        ["--shutdown-timeout", "inf"],
        ["--shutdown-timeout", "1e20"],
        ["--idle-timeout", "nan"],
        ["--idle-timeout", "-inf"],
        ["--idle-timeout", "0"],
    ],
)
def test_runjobs_rejects_bad_numbers(args):
    with pytest.raises(CommandError, match=f"argument {args[0]}: expected"):
        call_command("runjobs", *args)


def test_runjobs_refuses_to_serve_no_queue():
    with pytest.raises(CommandError, match="would serve no queue"):
        run("runjobs", "--pool", "default", "--queue", "a", "--exclude-queue", "a")


def test_jobs_queues_shows_pool_due_scheduled_and_the_oldest_due(settings):
    settings.JOBQUEUE = {"POOLS": {"fast": {"queues": ["emails"]}, "slow": {"queues": "*"}}}
    old = timezone.now() - dt.timedelta(minutes=5)
    JobFactory(queue="emails", run_at=old)
    JobFactory(queue="emails", run_at=timezone.now() + dt.timedelta(hours=1))
    FinishedJobFactory(queue="emails")
    JobFactory(queue="feeds", status="failed")
    JobFactory(queue="feeds", status="abandoned")
    lines = run("jobs", "queues").splitlines()
    assert lines[0].split() == [
        "queue",
        "pool",
        "due",
        "scheduled",
        "running",
        "failed",
        "abandoned",
        "oldest",
        "due",
    ]
    assert lines[1].split() == ["emails", "fast", "1", "1", "0", "0", "0", "5", "min"]
    assert lines[2].split() == ["feeds", "slow", "0", "0", "0", "1", "1", "-"]


def test_jobs_queues_flags_a_queue_no_pool_serves(settings):
    settings.JOBQUEUE = {"POOLS": {"fast": {"queues": ["emails"]}}}
    JobFactory(queue="reports")
    out, err = StringIO(), StringIO()
    call_command("jobs", "queues", stdout=out, stderr=err)
    assert "reports  NO POOL" in out.getvalue()
    assert 'queue "reports" is served by no pool' in err.getvalue()


def test_jobs_queues_json():
    JobFactory(queue="emails")
    [row] = json.loads(run("jobs", "queues", "--json"))
    assert row["queue"] == "emails" and row["pool"] == "default" and row["due"] == 1


def test_jobs_queues_names_pending_jobs_of_tasks_no_live_worker_registers():
    JobFactory(queue="emails", task_name="shop.other.send")
    JobFactory(queue="emails")
    out, err = StringIO(), StringIO()
    call_command("jobs", "queues", stdout=out, stderr=err)
    # No worker at all: every pending job is one, and the advice is to start a worker.
    assert out.getvalue().splitlines()[-1] == (
        "pending jobs of tasks no live worker has registered: "
        "shop.other.send (1), tests.testapp.tasks.add (1)"
    )
    assert "No worker is running" in err.getvalue()
    WorkerRow.objects.create(
        id="web-1:10:abc",
        hostname="web-1",
        pid=10,
        pool="default",
        queues={"queues": None, "excluded": []},
        tasks=["tests.testapp.tasks.add"],
        concurrency=4,
    )
    out, err = StringIO(), StringIO()
    call_command("jobs", "queues", stdout=out, stderr=err)
    assert out.getvalue().splitlines()[-1] == (
        "pending jobs of tasks no live worker has registered: shop.other.send (1)"
    )
    assert "define them in an installed app's tasks.py" in err.getvalue()
    [row] = json.loads(run("jobs", "queues", "--json"))
    assert row["unregistered"] == {"shop.other.send": 1} and row["due"] == 2


def test_jobs_workers_lists_live_workers_by_pool_with_jobs_held():
    assert run("jobs", "workers").strip() == "(no live workers)"
    WorkerRow.objects.create(
        id="web-1:10:abc",
        hostname="web-1",
        pid=10,
        pool="default",
        queues={"queues": None, "excluded": ["feeds"]},
        concurrency=4,
    )
    JobFactory(status="running", worker="web-1:10:abc", token="x" * 32)
    lines = run("jobs", "workers").splitlines()
    assert lines[0].split()[:5] == ["pool", "worker", "queues", "threads", "held"]
    assert lines[1].split()[:7] == ["default", "web-1:10:abc", "*", "except", "feeds", "4", "1"]
    [row] = json.loads(run("jobs", "workers", "--json"))
    assert (row["pool"], row["held"], row["pid"]) == ("default", 1, 10)


def test_jobs_prune(settings):
    settings.JOBQUEUE = {"RETENTION": {"succeeded": 60}}
    FinishedJobFactory(finished_at=timezone.now() - dt.timedelta(minutes=5))
    FinishedJobFactory()
    assert run("jobs", "prune").strip() == "pruned 1 job(s): 1 succeeded"
    assert Job.objects.count() == 1


@pytest.mark.process
def test_the_readme_demo_runs_on_a_fresh_sqlite_file(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}"}
    result = subprocess.run(
        [sys.executable, str(REPO / "testproject" / "manage.py"), "demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "shop.tasks.send_order_confirmation: succeeded, 1 attempt(s)" in out
    assert "shop.tasks.call_payment_webhook: succeeded, 3 attempt(s)" in out
    assert "shop.tasks.import_broken_feed: failed, 3 attempt(s)" in out
    assert "shop.tasks.rebuild_feed: succeeded, 1 attempt(s)" in out


@pytest.mark.parametrize("command", ["runjobs", "jobs"])
def test_version_is_jobqueues(command, capsys):
    import django
    from django.core.management import load_command_class

    import jobqueue

    parser = load_command_class("jobqueue", command).create_parser("manage.py", command)
    with pytest.raises(SystemExit):
        parser.parse_args(["--version"])
    printed = capsys.readouterr().out.strip()
    assert printed == jobqueue.__version__
    assert printed != django.get_version()


def test_jobs_help_gives_each_action_in_full(capsys):
    from django.core.management import load_command_class

    parser = load_command_class("jobqueue", "jobs").create_parser("manage.py", "jobs")
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "running, ..." not in text  # the old, cut description
    assert "with how long the oldest due job has waited" in text
    assert "and the ticks it skipped" in text
