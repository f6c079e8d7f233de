"""Every import path the docs give works, and every module path they name exists.

The docs (``docs/``, ``README.md``, ``CHANGELOG.md`` is history and left out) and
``shared/DESIGN.md`` beside the checkout are read as text: each ``from jobqueue... import``
and ``import jobqueue...`` line is imported, each dotted ``jobqueue.`` name is resolved
as a module or an attribute of one, and each ``jobqueue/...`` file path must exist. Dotted
names that are not paths (logger names, permission codenames, check ids, span attributes,
the systemd unit) are recognised by their first word.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import django
import pytest
from django.utils.module_loading import import_string

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT.parent / "shared" / "DESIGN.md"
DOCS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])

# The paths users are told to import or name in settings: kept exactly as they are.
PUBLIC = (
    "jobqueue.task",
    "jobqueue.Concurrency",
    "jobqueue.RateLimit",
    "jobqueue.Discard",
    "jobqueue.JobRunAborted",
    "jobqueue.PermanentError",
    "jobqueue.Snooze",
    "jobqueue.JobContext",
    "jobqueue.models.Job",
    "jobqueue.models.Worker",
    "jobqueue.models.Schedule",
    "jobqueue.models.QueuePause",
    "jobqueue.backend.JobQueueBackend",
    "jobqueue.backend.JobQueueTask",
    "jobqueue.tasks.Call",
    "jobqueue.store.Store",
    "jobqueue.testing.run_jobs",
    "jobqueue.testing.capture",
    "jobqueue.testing.Clock",
    "jobqueue.pytest_plugin",
    "jobqueue.signals.jobs_retried",
    "jobqueue.signals.OUTCOMES",
    "jobqueue.notice.AbandonedJobsMiddleware",
    "jobqueue.metrics.views.metrics",
    "jobqueue.pauses.pause",
    "jobqueue.pauses.resume",
    "jobqueue.schedules.state.set_paused",
    "jobqueue.conf.MAX_DELAY",
    "jobqueue.admin",
    "jobqueue.contrib.webhooks.send_event",
    "jobqueue.contrib.webhooks.models.Webhook",
    "jobqueue.contrib.webhooks.tasks.deliver",
    "jobqueue.contrib.sentry",
)

# First words of dotted names that are not module paths.
NOT_PATHS = {
    "worker", "supervisor", "service",  # loggers, the systemd unit (jobqueue.service)
    "attempt", "max_attempts", "outcome", "queue", "job_id", "skipped",  # span attributes
}  # fmt: skip
NOT_PATH_NAMES = {"jobqueue.contrib.webhooks.deliver"}  # the delivery task's registered name
NOT_PATH = re.compile(r"^jobqueue\.([EW]\d{3}|(add|change|delete|view)_\w+)$")
DOTTED = re.compile(r"(?<![\w/.-])jobqueue(?:\.[A-Za-z_]\w*)+")
IMPORT = re.compile(r"^\s*(?:from (jobqueue[\w.]*) import ([\w, ]+)|import (jobqueue[\w.]*))", re.M)
FILE = re.compile(r"(?<![\w.-])jobqueue/[\w/]+\.(?:py|sql|html)")


def texts() -> list[tuple[str, str]]:
    found = [(path.name, path.read_text()) for path in DOCS]
    if DESIGN.exists():
        found.append(("DESIGN.md", DESIGN.read_text()))
    return found


def needs_django_tasks(dotted: str) -> bool:
    """Whether ``dotted`` is the ``django.tasks`` backend, which Django 5.2 cannot import."""
    return django.VERSION < (6, 0) and (dotted + ".").startswith("jobqueue.backend.")


def resolves(dotted: str) -> bool:
    if needs_django_tasks(dotted):
        # Before Django 6.0 the backend's import fails, and says which Django it needs.
        with pytest.raises(ImportError, match="needs Django 6.0 or later"):
            importlib.import_module("jobqueue.backend")
        return True
    try:
        importlib.import_module(dotted)
        return True
    except ImportError:
        pass
    try:
        import_string(dotted)
        return True
    except ImportError:
        return False


@pytest.mark.parametrize("path", PUBLIC)
def test_each_public_path_imports(path):
    assert resolves(path), path


def test_design_is_read():
    # CI lays shared/ beside the clone; a developer's checkout has it too.
    assert DESIGN.exists(), f"{DESIGN} is missing"


def test_every_import_line_of_the_docs_works():
    failures = []
    for name, text in texts():
        for source, names, module in IMPORT.findall(text):
            targets = [module] if module else [f"{source}.{n.strip()}" for n in names.split(",")]
            failures += [f"{name}: {t}" for t in targets if t.strip(".") and not resolves(t)]
    assert not failures, failures


def test_every_dotted_jobqueue_name_in_the_docs_resolves():
    failures = []
    for name, text in texts():
        for dotted in sorted(set(DOTTED.findall(text))):
            dotted = dotted.rstrip(".")
            if dotted.split(".")[1] in NOT_PATHS or dotted in NOT_PATH_NAMES:
                continue
            if NOT_PATH.match(dotted):
                continue
            if not resolves(dotted):
                failures.append(f"{name}: {dotted}")
    assert not failures, failures


def test_every_file_the_docs_name_exists():
    failures = [
        f"{name}: {path}"
        for name, text in texts()
        for path in sorted(set(FILE.findall(text)))
        if not (ROOT / path).exists()
    ]
    assert not failures, failures
