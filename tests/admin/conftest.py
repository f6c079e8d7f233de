"""Admin fixtures: users with and without the app's permissions, an empty cache, and a
headless browser for the end-to-end tests."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from django.db import connections
from django.test import Client

from tests.admin.browser import ARGS, CHROMIUM, unavailable


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    for codename in codenames:
        app_label, _, name = codename.partition(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=name)
        )
    return user


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def operator(db) -> Client:
    """Staff who may view and change jobs (so run the actions) and view workers."""
    return client_for(
        staff("operator", "jobqueue.view_job", "jobqueue.change_job", "jobqueue.view_worker")
    )


@pytest.fixture
def viewer(db) -> Client:
    """Staff who may only look at jobs."""
    return client_for(staff("viewer", "jobqueue.view_job"))


@pytest.fixture
def outsider(db) -> Client:
    """Staff with admin access to something else, and none to jobs."""
    return client_for(staff("outsider", "auth.view_user"))


@pytest.fixture
def browser(monkeypatch):
    """A headless Chromium (``tests/admin/browser.py``), closed after the test."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install playwright)")
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    # Playwright's sync API keeps an event loop on this thread; the ORM calls in the tests
    # are plain synchronous test code, not code running inside that loop.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        # Django keeps its connections in context variables, and Playwright's sync API runs
        # this code in a context of its own: a connection it kept from an earlier browser
        # test may be dead (a test that restarts PostgreSQL ran since). Drop it, so that
        # the test's first query connects anew.
        for conn in connections.all(initialized_only=True):
            if not conn.is_usable():
                conn.close()
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()
