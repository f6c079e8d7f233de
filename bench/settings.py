"""Bench settings: the example project plus the bench app, without debug overhead.

``bench/run.py`` sets ``DATABASE_URL`` to the bench database before this module is read,
and worker subprocesses inherit it, so every process uses the same database.
"""

from testproject.settings import *  # noqa: F403
from testproject.settings import DATABASES, INSTALLED_APPS

from bench.peers._common import MYSQL_OPTIONS

# DEBUG records every statement (CursorDebugWrapper) and keeps them in memory: production
# runs without it, so the bench does too.
DEBUG = False
INSTALLED_APPS = [*INSTALLED_APPS, "bench.benchapp"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":  # --database mysql
    DATABASES["default"].setdefault("OPTIONS", {}).update(MYSQL_OPTIONS)

# Per-job INFO lines would measure the logging, not the queue.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"jobqueue": {"handlers": ["console"], "level": "WARNING"}},
}
