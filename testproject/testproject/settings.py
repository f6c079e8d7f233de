"""A small Django project that uses jobqueue.

The database comes from ``DATABASE_URL`` (django-environ); without it, a SQLite file next to
this project. For example ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/test``.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

SECRET_KEY = env("SECRET_KEY", default="insecure-example-key-for-the-jobqueue-testproject")
DEBUG = env.bool("DEBUG", default=True)
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "jobqueue",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # A notice on every admin page while abandoned jobs wait for an operator.
    "jobqueue.notice.AbandonedJobsMiddleware",
]

ROOT_URLCONF = "testproject.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASE_URL = env.str("DATABASE_URL", default="") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
DATABASES = {"default": env.db_url_config(DATABASE_URL)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Writers wait for the lock (up to 20 s) instead of failing with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"transaction_mode": "IMMEDIATE", "timeout": 20}
    )

if DATABASES["default"]["ENGINE"] == "django.db.backends.mysql":
    # MySQL and MariaDB (docs/mysql.md): READ COMMITTED, so that a claim's SKIP LOCKED and
    # each statement see what other transactions committed, with no gap locks; utf8mb4 for
    # every character; strict mode, so that a value too long is an error, not truncated.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "isolation_level": "read committed",
            "charset": "utf8mb4",
            "init_command": "SET sql_mode = 'STRICT_TRANS_TABLES'",
        }
    )
    DATABASES["default"].setdefault("TEST", {}).update(
        {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"}
    )

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env.bool(
    "DATABASE_PREPARED", default=False
):
    # Prepared statements: psycopg prepares a statement the fifth time a connection runs it,
    # then sends only its parameters. Django leaves them off, because a transaction-pooling
    # PgBouncer older than 1.21 (or without max_prepared_statements) breaks them.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"server_side_binding": True, "prepare_threshold": 5}
    )

if env.str("DATABASE_POOLER", default="") == "pgbouncer":
    # DATABASE_URL is a transaction-mode PgBouncer. Outside atomic(), Django's server-side
    # cursors (QuerySet.iterator()) are declared WITH HOLD and read across transactions, so
    # later fetches may reach another server session, where the cursor does not exist.
    # LISTEN goes to the database itself: DATABASE_DIRECT_URL (docs/deployment.md).
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True

USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

JOBQUEUE = {
    "POOLS": {"default": {"queues": "*", "concurrency": 4}},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "jobqueue": {"handlers": ["console"], "level": env("JOBQUEUE_LOG_LEVEL", default="INFO")}
    },
}
