"""The management commands: thin argument parsing over the runtime and the store."""

import datetime as dt
import json
import os
import re
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
        "paused",
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
def test_the_readme_demo_tells_its_seven_stories_on_a_fresh_sqlite_file(tmp_path):
    # Run as README command 1 runs it, with no arguments; TMPDIR keeps its files in tmp_path.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, str(REPO / "testproject" / "manage.py"), "demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    [database] = tmp_path.glob("jobqueue-demo-*/demo.sqlite3")
    assert f"jobqueue demo on sqlite:///{database}" in out
    stories = dict(
        (int(title.split(".")[0]), body)
        for title, body in (part.split("\n", 1) for part in re.split(r"\n\n(?=\d\. )", out)[1:8])
    )
    assert sorted(stories) == [1, 2, 3, 4, 5, 6, 7]
    assert re.search(r"running +attempt 1 of 3", stories[1])
    assert re.search(r"succeeded +result \{'order': 1001, 'sent': True\}", stories[1])
    assert stories[2].count("retry due at") == 2
    assert "(in 0.50 s)" in stories[2] and "(in 1.00 s)" in stories[2]
    assert re.search(r"running +attempt 3 of 5", stories[2])
    assert re.search(r"failed +attempt 3 failed: ValueError", stories[3])
    assert stories[3].count(": ValueError: feed at https://example.com/feed.xml") == 6
    assert "3 before, 3 after: nothing was enqueued" in stories[4]
    assert "SIGKILL sent to pid" in stories[5]
    assert re.search(r"pending +recovered by the demo's worker: The worker stopped", stories[5])
    assert "Returned to pending without spending an attempt" in " ".join(stories[5].split())
    assert re.search(r"succeeded +result 'album 42", stories[5])
    assert re.search(r"abandoned +parked", stories[6])
    assert "status abandoned, attempts 0 / 3, crashes 1" in " ".join(stories[6].split())
    assert 'Parked as abandoned (on_crash="park")' in " ".join(stories[6].split())
    assert "Retried 1 job." in stories[6]
    assert re.search(r"succeeded +result 'order 1001 charged once", stories[6])
    assert "unfinished returned None" in stories[7]
    assert re.search(r"succeeded +result \{'shop': 7", stories[7])
    # Every job has ended as its story says; nothing was left running.
    assert "shop.tasks.call_payment_webhook: succeeded, 3 attempt(s)" in out
    assert "shop.tasks.import_broken_feed: failed, 3 attempt(s)" in out
    assert "shop.tasks.charge_card: succeeded, 1 attempt(s)" in out
    # The logs went to the file, not into the stories; the way to look further is printed.
    [log] = tmp_path.glob("jobqueue-demo-*/demo.log")
    assert "recovered as abandoned" in log.read_text()
    assert " INFO " not in out and " WARNING " not in out
    assert f"DATABASE_URL=sqlite:///{database} " in out and "jobs queues" in out
    assert "http://127.0.0.1:8000/admin/jobqueue/job/" in out


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
