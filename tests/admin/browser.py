"""Headless Chromium for the admin's end-to-end tests: Debian's ``chromium``, driven by
Playwright's Python package (never ``playwright install``).

A test takes the ``browser`` fixture (``tests/admin/conftest.py``): a launched browser, or a
skip when Chromium or Playwright is missing, except in CI (``CI=true``), where that is a
failure. ``screenshots(tmp_path)`` says where a test saves its screenshots:
``JOBQUEUE_SCREENSHOTS`` (relative to the repository) when set, to refresh the docs'
pictures; else ``ci-artifacts/screenshots/`` under CI, so that they outlive the run; else
the test's temporary folder, so a local run leaves the tree clean.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import IN_CI, REPO

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = REPO / "ci-artifacts" / "screenshots"


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}; CI must run the browser tests (.ci/run installs chromium)")
    pytest.skip(reason)


def screenshots(tmp_path: Path) -> Path:
    """The folder this test's screenshots go to (see the module's docstring)."""
    wanted = os.environ.get("JOBQUEUE_SCREENSHOTS")
    folder = REPO / wanted if wanted else ARTIFACTS if IN_CI else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def log_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
