"""LISTEN pointed at PgBouncer in transaction mode by mistake: the worker says so at start-up
and works on its safety poll instead of waiting for notifications that never arrive."""

import re

import pytest

from jobqueue.runtime.listener import POOLER_WARNING
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import Execution

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def _looks(output: str) -> int:
    return len(re.findall(r"DEBUG jobqueue\.worker: looked for", output))


def test_a_worker_listening_through_pgbouncer_says_so_and_polls(start_worker, pgbouncer_url):
    worker = start_worker(settings={"POLL_INTERVAL": 0.5, "LISTEN_URL": pgbouncer_url})
    wait_for(lambda: POOLER_WARNING in worker.output(), timeout=30, message="the warning")
    # Not listening, so it polls: 0.5 s after an empty look, then 1 s, 2 s ... (with LISTEN
    # it would look only every 30 s).
    looks = _looks(worker.output())
    wait_for(
        lambda: _looks(worker.output()) >= looks + 2,
        timeout=10,
        message="two more looks of its poll",
    )
    job = tasks.noop.enqueue("found by a poll")
    # Its next wait is at most 4 s by now; the enqueue's NOTIFY reaches no one.
    wait_for(
        lambda: Execution.objects.filter(job_id=job.pk).exists(),
        timeout=15,
        message="the job to start on the worker's poll",
    )
    output = worker.output()
    assert output.count(POOLER_WARNING) == 1, output
    assert "woken by a notification" not in output
    assert "LISTEN connection lost" not in output  # a setting to fix, not an outage
