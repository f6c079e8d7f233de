"""Values PostgreSQL would refuse are refused at enqueue, before any SQL, on every database.

SQLite stores a NUL byte, a lone surrogate or a 70-bit integer; PostgreSQL refuses them
with a ``DataError`` that names nothing and aborts the caller's transaction. So both
databases get PostgreSQL's rules, checked in Python before the insert: the error names the
argument or option, and the caller's transaction goes on as if nothing had happened.
"""

import datetime as dt

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue import conf, task
from jobqueue.models import Job
from jobqueue.tasks.arguments import MAX_NESTING
from jobqueue.tasks.base import Call
from tests.testapp import tasks


@task
def takes_anything(*values, **named):
    return None


MARIADB_NESTING = 32


def nested(depth, leaf="x"):
    """``depth`` lists, one inside the other, around ``leaf``."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.django_db(transaction=True)
def test_a_nul_byte_in_a_transaction_raises_at_once_and_the_transaction_goes_on():
    with transaction.atomic():
        kept = tasks.add.enqueue(1, 2)
        refused = pytest.raises(ValueError, match=r"tests\.testapp\.tasks\.add: argument 'b'")
        with CaptureQueriesContext(connection) as queries, refused:
            tasks.add.enqueue(1, "bad\x00text")
        assert len(queries) == 0, "refused before any SQL ran"
        also = tasks.add.enqueue(3, 4)
    rows = Job.objects.filter(pk__in=[kept.pk, also.pk]).order_by("pk")
    assert [(job.args, job.status) for job in rows] == [([1, 2], "pending"), ([3, 4], "pending")]
    assert Job.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_every_refusal_leaves_the_transaction_usable():
    bad_calls = [
        lambda: tasks.add.enqueue(1, "\ud800"),
        lambda: tasks.add.enqueue(2**63, 1),
        lambda: tasks.add.using(queue="mail\x00").enqueue(1, 2),
        lambda: tasks.add.using(idempotency_key="k\x00").enqueue(1, 2),
        lambda: tasks.add.using(delay=1e20).enqueue(1, 2),
        lambda: tasks.add.enqueue_many([(1, 2), Call((1, 2), idempotency_key="\udfff")]),
        lambda: tasks.add.enqueue({"x": nested(5000)}, 1),
    ]
    with transaction.atomic():
        for call in bad_calls:
            with pytest.raises((TypeError, ValueError)):
                call()
        job = tasks.add.enqueue(5, 6)
    assert Job.objects.get().pk == job.pk


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tasks.add.enqueue("a\x00", 1), "argument 'a' cannot be stored: a string that "),
        (lambda: tasks.add.enqueue(1, ["ok", {"k": "\x00"}]), "argument 'b'[1]['k'] cannot be"),
        (lambda: tasks.add.enqueue("\ud800", 1), "the lone surrogate '\\ud800' at offset 0"),
        (lambda: tasks.add.enqueue(1, "é\udc80"), "argument 'b' cannot be stored"),
        (lambda: tasks.add.enqueue({"k\x00": 1}, 1), "argument 'a' cannot be stored: dict key"),
        (lambda: tasks.add.enqueue({"\ud800": 1}, 1), "dict key '\\ud800' contains the lone"),
        (lambda: tasks.add.enqueue(2**63, 1), "9223372036854775808 is outside the signed 64-bit"),
        (lambda: tasks.add.enqueue(1, -(2**63) - 1), "argument 'b' cannot be stored"),
        (lambda: tasks.add.enqueue([10**5000], 1), "'a'[0] cannot be stored: an integer of"),
        (lambda: tasks.add.enqueue_many([(1, 2), (1, 2**64)]), "argument 'b' cannot be"),
        (lambda: tasks.echo.enqueue(value=nested(MAX_NESTING + 1)), "nest more than 100 levels"),
        (lambda: tasks.echo.enqueue(value=nested(5000)), "argument 'value'"),
        (lambda: takes_anything.enqueue(1, "\x00"), "argument '*values[1]' cannot be stored"),
        (lambda: takes_anything.enqueue(**{"k\x00": 1}), "the name of keyword argument 'k\\x00'"),
        (lambda: takes_anything.enqueue(**{"\ud800": 1}), "the name of keyword argument"),
        (lambda: takes_anything.enqueue(k="\x00"), "argument 'k' cannot be stored"),
    ],
)
def test_unstorable_arguments_are_value_errors_naming_the_argument(call, message):
    with pytest.raises(ValueError) as excinfo:
        call()
    assert message in str(excinfo.value)
    assert not Job.objects.exists()


def test_a_cycle_is_an_error_naming_the_argument_not_a_recursion_error():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match=r"argument 'value'.* nest more than 100 levels"):
        tasks.echo.enqueue(value=loop)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queue": "mail\x00"}, "queue cannot be stored: it contains a NUL byte"),
        ({"queue": "\ud800"}, "queue cannot be stored: it contains the lone surrogate"),
        ({"idempotency_key": "a\x00b"}, "idempotency_key cannot be stored: it contains a NUL"),
        ({"idempotency_key": "\udfff"}, "idempotency_key cannot be stored"),
        ({"max_attempts": 2**31}, "max_attempts must be a whole number from 1 to 2,147,483,647"),
        ({"max_attempts": 10**5000}, "not an integer of"),
        ({"delay": 1e20}, "delay must be a number of seconds from 0 to 315,360,000"),
        ({"delay": 10**400}, "delay must be a number of seconds"),
        ({"delay": float("inf")}, "not inf"),
        ({"delay": float("nan")}, "not nan"),
        ({"delay": conf.MAX_DELAY + 1}, "(conf.MAX_DELAY, ten years)"),
        (
            # A day over, not a minute: the time is taken when the tests are collected,
            # and a slow suite may reach this case minutes later.
            {"run_at": timezone.now() + dt.timedelta(seconds=conf.MAX_DELAY + 86_400)},
            "seconds (conf.MAX_DELAY, ten years) ahead",
        ),
        (
            {"run_at": dt.datetime(9999, 12, 31, tzinfo=dt.UTC)},
            "seconds (conf.MAX_DELAY, ten years) ahead",
        ),
        (
            {"run_at": dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5)))},
            "has no UTC equivalent",
        ),
    ],
)
def test_unstorable_options_are_value_errors_naming_the_option(options, message):
    with pytest.raises(ValueError) as excinfo:
        tasks.add.using(**options)
    assert message in str(excinfo.value)
    assert str(excinfo.value).startswith("tests.testapp.tasks.add: ")


@pytest.mark.django_db
def test_a_call_key_is_checked_like_an_idempotency_key():
    with pytest.raises(ValueError, match="idempotency_key cannot be stored: it contains a NUL"):
        tasks.add.enqueue_many([Call((1, 2), idempotency_key="k\x00")])
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_limits_themselves_are_stored_and_read_back_on_every_database():
    # MariaDB's JSON check (JSON_VALID) refuses a document more than 32 deep, its scalars
    # counted: the deepest it stores, with kwargs' dict, the list of values and the leaf
    # (docs/mysql.md).
    mariadb = connection.vendor == "mysql" and connection.mysql_is_mariadb
    depth = MARIADB_NESTING - 3 if mariadb else MAX_NESTING - 1
    values = [2**63 - 1, -(2**63), "é", "😀 \u2028 \ufeff", nested(depth, 7), 0.5]
    job = tasks.echo.using(
        delay=conf.MAX_DELAY, max_attempts=2**31 - 1, queue="q\u00e9", idempotency_key="k\u00e9"
    ).enqueue(value=values)
    row = Job.objects.get(pk=job.pk)
    assert row.kwargs == {"value": values}
    assert (row.max_attempts, row.queue, row.idempotency_key) == (2**31 - 1, "qé", "ké")
    expected = row.enqueued_at + dt.timedelta(seconds=conf.MAX_DELAY)
    assert abs((row.run_at - expected).total_seconds()) < 1


@pytest.mark.django_db
def test_valid_non_ascii_text_takes_the_slow_path_and_passes():
    jobs = tasks.add.enqueue_many([("naïve", "ok"), ("日本", "\x7f"), (1, 2)])
    assert [Job.objects.get(pk=j.pk).args for j in jobs] == [
        ["naïve", "ok"],
        ["日本", "\x7f"],
        [1, 2],
    ]
