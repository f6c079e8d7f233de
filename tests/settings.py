"""Test settings: the example project plus a test app.

Worker subprocesses started by the tests read the same module; the environment tells them
which database to use (the test database) and which JOBQUEUE overrides to apply.
"""

import json
import os
import tempfile

import django
from testproject.settings import *  # noqa: F403
from testproject.settings import DATABASES, INSTALLED_APPS, JOBQUEUE

INSTALLED_APPS = [*INSTALLED_APPS, "jobqueue.contrib.webhooks", "tests.testapp"]

default = DATABASES["default"]
if default["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory: worker subprocesses must see the same database.
    default["TEST"] = {
        "NAME": os.path.join(tempfile.gettempdir(), f"jobqueue-test-{os.getpid()}.sqlite3")
    }
if os.environ.get("JOBQUEUE_TEST_DB_NAME"):
    default["NAME"] = os.environ["JOBQUEUE_TEST_DB_NAME"]

JOBQUEUE = {**JOBQUEUE, **json.loads(os.environ.get("JOBQUEUE_TEST_SETTINGS", "{}"))}

if django.VERSION >= (6,):
    TASKS = {
        "default": {
            "BACKEND": "jobqueue.backend.JobQueueBackend",
            "QUEUES": ["default", "emails"],
        }
    }
# Django's documentation example tasks send mail, in worker processes too.
if django.VERSION >= (6, 1):
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
else:
    EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"jobqueue": {"handlers": ["console"], "level": "DEBUG"}},
}
