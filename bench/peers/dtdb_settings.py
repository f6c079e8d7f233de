"""Django settings for the django-tasks-db peer: django.tasks with the database backend."""

import os
from urllib.parse import urlsplit

from _common import MYSQL_OPTIONS

_url = urlsplit(os.environ["BENCH_DSN"])
SECRET_KEY = "bench"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": _url.username or "",
        "PASSWORD": _url.password or "",
        "HOST": _url.hostname or "",
        "PORT": _url.port or "",
    }
}
if _url.scheme == "sqlite":  # bench/run.py --database sqlite: a file beside the bench's
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ["BENCH_DSN"].removeprefix("sqlite:///"),
            # What SQLite with concurrent writers needs, and jobqueue's test project sets:
            # WAL, and transactions that take the write lock when they begin.
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL",
            },
        }
    }
elif _url.scheme == "mysql":  # bench/run.py --database mysql: MariaDB
    DATABASES["default"]["ENGINE"] = "django.db.backends.mysql"
    DATABASES["default"]["OPTIONS"] = dict(MYSQL_OPTIONS)
elif os.environ.get("DATABASE_PREPARED") == "true":  # bench/run.py --prepared
    DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 5}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
