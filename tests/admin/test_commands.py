"""``manage.py jobs retry|discard``: the same store calls and report as the admin."""

import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobqueue.management import operator_commands
from jobqueue.models import Job
from tests.conftest import REPO
from tests.factories import FinishedJobFactory, JobFactory

pytestmark = pytest.mark.django_db


def run(*args):
    out, err = StringIO(), StringIO()
    call_command("jobs", *args, stdout=out, stderr=err)
    return out.getvalue().strip(), err.getvalue()


def test_retry_by_id_reports_skips():
    failed, done = JobFactory(status="failed"), FinishedJobFactory()
    out, _ = run("retry", str(failed.pk), str(done.pk))
    assert out == "Retried 1 job, skipped 1 job because it succeeded."
    assert Job.objects.get(pk=failed.pk).status == "pending"


@pytest.mark.parametrize("action", ["retry", "discard"])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_ids_that_do_not_exist_fail_the_command_after_doing_the_rest(action, dry_run):
    failed = JobFactory(status="failed")
    out, err = StringIO(), StringIO()
    with pytest.raises(
        CommandError, match=r"^2 of the 3 job id\(s\) given do not exist: 424242, 424243$"
    ):
        call_command(
            "jobs", action, str(failed.pk), "424243", "424242", *dry_run, stdout=out, stderr=err
        )
    past = {"retry": "Retried", "discard": "Discarded"}[action]
    done = f"Would {action} 1 job, would skip" if dry_run else f"{past} 1 job, skipped"
    assert out.getvalue().strip() == f"{done} 2 jobs because they no longer exist."
    expected = "failed" if dry_run else {"retry": "pending", "discard": "discarded"}[action]
    assert Job.objects.get(pk=failed.pk).status == expected


def test_a_missing_id_with_a_filter_fails_the_command_too():
    failed = JobFactory(status="failed")
    with pytest.raises(CommandError, match="1 of the 2 job id"):
        run("retry", str(failed.pk), "424242", "--status", "failed")
    assert Job.objects.get(pk=failed.pk).status == "pending"


def test_manage_py_exits_non_zero_for_a_missing_id(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'ops.sqlite3'}"}
    manage = [sys.executable, str(REPO / "testproject" / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, timeout=120)
    result = subprocess.run(
        [*manage, "jobs", "discard", "424242"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout.strip() == ("Discarded 0 jobs, skipped 1 job because it no longer exists.")
    assert "1 of the 1 job id(s) given do not exist: 424242" in result.stderr


def test_retry_by_filter():
    emails = JobFactory.create_batch(2, status="failed", queue="emails")
    other_task = JobFactory(status="failed", queue="emails", task_name="shop.tasks.other")
    feeds = JobFactory(status="failed", queue="feeds")
    out, _ = run("retry", "--status", "failed", "--queue", "emails", "--task", emails[0].task_name)
    assert out == "Retried 2 jobs."
    assert Job.objects.get(pk=other_task.pk).status == "failed"
    assert Job.objects.get(pk=feeds.pk).status == "failed"


def test_retry_says_when_a_newer_job_holds_the_key():
    JobFactory(status="abandoned", idempotency_key="sync:1")
    JobFactory(idempotency_key="sync:1")
    out, _ = run("retry", "--status", "abandoned")
    assert out == (
        "Retried 0 jobs, skipped 1 job because a newer unfinished job holds its idempotency key."
    )


def test_discard_by_filter_and_dry_run():
    jobs = JobFactory.create_batch(3, queue="feeds")
    out, _ = run("discard", "--queue", "feeds", "--dry-run")
    assert out == "Would discard 3 jobs."
    assert set(Job.objects.values_list("status", flat=True)) == {"pending"}
    out, _ = run("discard", "--queue", "feeds")
    assert out == "Discarded 3 jobs."
    assert {Job.objects.get(pk=j.pk).status for j in jobs} == {"discarded"}


def test_a_selection_is_required():
    with pytest.raises(CommandError, match="say which jobs to retry: give job ids, or --status"):
        run("retry")


@pytest.mark.parametrize("bad", ["0", "-3", "abc"])
def test_ids_are_validated(bad):
    with pytest.raises(CommandError, match="expected a job id"):
        run("discard", bad)


def test_a_large_selection_goes_in_batches_with_progress(monkeypatch):
    monkeypatch.setattr(operator_commands, "BATCH", 10)
    Job.objects.bulk_create([Job(task_name="t", status="failed") for _ in range(25)])
    JobFactory(status="running")
    out, err = run("retry", "--status", "failed")
    assert out == "Retried 25 jobs."
    assert err.splitlines() == [
        "retry: 10 of 25 jobs (40%)",
        "retry: 20 of 25 jobs (80%)",
        "retry: 25 of 25 jobs (100%)",
    ]
    assert Job.objects.filter(status="pending").count() == 25


def test_other_subcommands_still_work():
    JobFactory(status="failed")
    out, _ = run("queues")
    assert "default" in out
    out, _ = run("prune")
    assert out.startswith("pruned")
