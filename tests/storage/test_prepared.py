"""Prepared statements: jobqueue's statements are prepared exactly when the project turns
them on (Django's ``server_side_binding`` with a ``prepare_threshold``), never otherwise.

``tox -e py312-django61-postgres-prepared`` runs the whole suite with them on.
"""

import pytest
from django.db import connection

from jobqueue.store.jobs import Store
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_statements_are_prepared_only_when_the_project_turns_them_on(postgresql_only):
    options = connection.settings_dict["OPTIONS"]
    turned_on = (
        options.get("server_side_binding") is True and options.get("prepare_threshold") is not None
    )
    store = Store()
    for n in range(6):  # psycopg prepares on the fifth run
        tasks.add.enqueue(n, n)
        store.claim(worker="w1", task_names=[tasks.add.name], queues=None, excluded=(), limit=1)

    statements = prepared_statements()

    assert any("INSERT INTO jobqueue_job" in s for s in statements) is turned_on
    assert any("FOR UPDATE SKIP LOCKED" in s for s in statements) is turned_on
