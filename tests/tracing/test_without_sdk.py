"""Without OpenTelemetry, and with its API but no SDK: jobs enqueue and run as ever, and
store no trace context. In a subprocess each, since this session's provider is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import importlib.abc, json, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"{name} is blocked by the test")
        return None

if sys.argv[1] == "blocked":
    sys.meta_path.insert(0, Blocked())

import django
django.setup()

from jobqueue.tasks import tracing
from jobqueue.models import Job
from jobqueue.testing import run_jobs
from tests.testapp import tasks

def enqueue():
    return [tasks.add.enqueue(2, 3).pk] + [j.pk for j in tasks.add.enqueue_many([(1, 1), (2, 2)])]

if sys.argv[1] == "blocked":
    ids = enqueue()
else:
    from opentelemetry import trace  # the API's no-op tracer: no provider is set
    with trace.get_tracer("script").start_as_current_span("request"):
        ids = enqueue()
run_jobs()
rows = Job.objects.filter(pk__in=ids).order_by("pk")
print(json.dumps({
    "enabled": tracing.enabled(),
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"),
    "rows": [[row.status, row.result, row.trace_context] for row in rows],
}))
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["blocked", "api-only"])
def test_jobs_run_and_store_no_trace_context_without_a_tracer(mode: str) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "testproject")]),
        "JOBQUEUE_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["rows"] == [["succeeded", result, None] for result in (5, 2, 4)]
    if mode == "blocked":
        assert report == {**report, "enabled": False, "loaded": []}
    else:
        assert report["enabled"] is True
