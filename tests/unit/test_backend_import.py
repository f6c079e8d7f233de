"""On Django 5.2 the app works without django.tasks, and the backend says what it needs."""

import importlib
import sys

import django
import pytest


@pytest.mark.skipif(django.VERSION >= (6,), reason="django.tasks exists from Django 6")
def test_importing_the_backend_on_django_5_says_django_6_is_needed():
    sys.modules.pop("jobqueue.backend", None)
    with pytest.raises(ImportError, match=r"needs Django 6\.0 or later; this is Django 5\.2"):
        importlib.import_module("jobqueue.backend")


@pytest.mark.skipif(django.VERSION < (6,), reason="django.tasks exists from Django 6")
def test_the_backend_imports_on_django_6():
    assert importlib.import_module("jobqueue.backend").JobQueueBackend.supports_defer


def test_the_test_kit_does_not_need_django_tasks():
    assert importlib.import_module("jobqueue.testing").capture
