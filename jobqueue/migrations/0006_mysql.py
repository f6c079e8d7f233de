"""MySQL and MariaDB: what the partial indexes and the partial unique constraint do elsewhere.

Neither has partial indexes, so Django creates ``jobqueue_job_claim`` and
``jobqueue_job_running_lease`` there without their conditions (over every row) and skips the
``jobqueue_job_unfinished_key`` constraint altogether. Here, on MySQL and MariaDB only, each
becomes an index on a stored generated column that is NULL unless the row is in the state
the partial index covers: finished rows all sit in one NULL range at the index's start, which
the claim's range scan steps over (docs/mysql.md shows the EXPLAIN), and the UNIQUE index on
``unfinished_key`` lets NULLs repeat, so only unfinished jobs' keys collide. The statements of
``jobqueue/sql/mysql.sql`` name these columns. On every other database this does nothing.

``claim_rank`` is ``-priority``, not ``priority`` in a descending index: MariaDB before 10.8
reads ``DESC`` in an index definition and ignores it. ``unfinished_key`` is the key's bytes
(a varbinary: 255 characters of utf8mb4), so keys compare as PostgreSQL and SQLite compare
them, whatever the table's collation: a case-insensitive one would make "A" and "a" one
key, and even a _bin one ignores trailing spaces.
"""

from collections.abc import Callable

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

FORWARD = [
    "DROP INDEX jobqueue_job_claim ON jobqueue_job",
    "DROP INDEX jobqueue_job_running_lease ON jobqueue_job",
    """ALTER TABLE jobqueue_job
        ADD COLUMN claim_rank smallint
            GENERATED ALWAYS AS (CASE WHEN status = 'pending' THEN -priority END) STORED,
        ADD COLUMN running_lease datetime(6)
            GENERATED ALWAYS AS (CASE WHEN status = 'running' THEN lease_until END) STORED,
        ADD COLUMN unfinished_key varbinary(1020)
            GENERATED ALWAYS AS (
                CASE WHEN status IN ('pending', 'running') THEN CAST(idempotency_key AS BINARY) END
            ) STORED""",
    "CREATE INDEX jobqueue_job_claim ON jobqueue_job (claim_rank, run_at, id)",
    "CREATE INDEX jobqueue_job_running_lease ON jobqueue_job (running_lease)",
    "CREATE UNIQUE INDEX jobqueue_job_unfinished_key ON jobqueue_job (unfinished_key)",
]

BACKWARD = [
    "DROP INDEX jobqueue_job_unfinished_key ON jobqueue_job",
    "DROP INDEX jobqueue_job_running_lease ON jobqueue_job",
    "DROP INDEX jobqueue_job_claim ON jobqueue_job",
    """ALTER TABLE jobqueue_job
        DROP COLUMN unfinished_key, DROP COLUMN running_lease, DROP COLUMN claim_rank""",
    # As Django created them: the conditions ignored.
    "CREATE INDEX jobqueue_job_claim ON jobqueue_job (priority DESC, run_at, id)",
    "CREATE INDEX jobqueue_job_running_lease ON jobqueue_job (lease_until)",
]


def _run(statements: list[str]) -> Callable[[StateApps, BaseDatabaseSchemaEditor], None]:
    def run(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor != "mysql":
            return
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("jobqueue", "0005_job_trace_context"),
    ]

    operations = [
        # Not atomic: MySQL commits each DDL statement, so Django refuses one in a transaction.
        migrations.RunPython(_run(FORWARD), _run(BACKWARD), atomic=False, elidable=False),
    ]
