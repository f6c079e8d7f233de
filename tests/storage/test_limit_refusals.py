"""A limit key's value that cannot be a key is refused at enqueue, before any SQL.

The value of a ``Concurrency`` or ``RateLimit`` key, the argument it names or what its
callable returns, must be a ``str`` or an ``int`` of 1 to 200 characters. Anything else is a
``ValueError`` naming the task, the argument and the limit, raised before a statement runs:
the caller's transaction goes on (on PostgreSQL an error inside it would abort it), and
nothing of the refused call, nor of an ``enqueue_many`` holding it, is written. The values
are checked on every database, before the check that the database's claim enforces limits
(PostgreSQL's, in this version): a mistake is reported as itself wherever it is made.
"""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from jobqueue import Concurrency, RateLimit, task
from jobqueue.models import Job
from jobqueue.sql import Queries
from jobqueue.testing import capture
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

needs_flow_control = pytest.mark.skipif(
    not Queries("default").flow_control,
    reason="flow control is PostgreSQL's in this version; the enqueue refuses it here",
)
TENANT = "tests.testapp.tasks.per_tenant"
ACCOUNT = "tests.testapp.tasks.per_account"


def region_of(order):
    return order.get("region")


@task(name="tests.limits.by_region", concurrency=Concurrency(key=region_of, limit=1))
def by_region(order):
    return order


@task(
    name="tests.limits.by_shop",
    rate_limit=RateLimit(key=lambda shop, **rest: shop * 3, limit=2, per=1.0),
)
def by_shop(shop, note=""):
    return note


NOT_A_KEY = "is the Concurrency key, so it must be a str or an int, not"
TOO_LONG = "is the Concurrency key, so it must be from 1 to 200 characters, not"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.5, f"{TENANT}: argument 'tenant' {NOT_A_KEY} float 1.5."),
        (True, f"{TENANT}: argument 'tenant' {NOT_A_KEY} bool True."),
        (None, f"{TENANT}: argument 'tenant' {NOT_A_KEY} None."),
        ({"id": 7}, f"{TENANT}: argument 'tenant' {NOT_A_KEY} dict {{'id': 7}}."),
        ([7], f"{TENANT}: argument 'tenant' {NOT_A_KEY} list [7]."),
        ("", f"{TENANT}: argument 'tenant' {TOO_LONG} 0 characters ('')."),
        ("t" * 201, f"{TENANT}: argument 'tenant' {TOO_LONG} 201 characters ('{'t' * 56}...)."),
    ],
)
def test_a_key_argument_that_is_no_key_is_a_value_error_naming_it(value, message):
    with CaptureQueriesContext(connection) as queries, pytest.raises(ValueError) as raised:
        tasks.per_tenant.enqueue(value)
    assert str(raised.value) == message
    assert len(queries) == 0, "refused before any SQL ran"
    assert not Job.objects.exists()


@needs_flow_control
def test_the_longest_key_and_an_int_key_are_stored():
    longest = tasks.per_tenant.enqueue("t" * 200)
    negative = tasks.per_tenant.enqueue(tenant=-(2**63))
    assert Job.objects.get(pk=longest.pk).concurrency_key == f"{TENANT}:{'t' * 200}"
    assert Job.objects.get(pk=negative.pk).concurrency_key == f"{TENANT}:{-(2**63)}"


def test_a_rate_key_is_checked_as_a_concurrency_key_is():
    with pytest.raises(ValueError) as raised:
        tasks.per_account.enqueue(account=2.5)
    assert str(raised.value) == (
        f"{ACCOUNT}: argument 'account' is the RateLimit key, so it must be a str or an int, "
        "not float 2.5."
    )
    with pytest.raises(ValueError, match=r"argument 'account' cannot be stored: .* NUL byte"):
        tasks.per_account.enqueue("acct\x00")  # refused as an argument, before it is a key
    assert not Job.objects.exists()


def test_what_a_callable_key_returns_is_checked():
    with pytest.raises(ValueError) as raised:
        by_region.enqueue({"region": 4.5})
    assert str(raised.value) == (
        "tests.limits.by_region: the Concurrency key region_of() returned float 4.5; it "
        "must return a str or an int."
    )
    with pytest.raises(ValueError, match=r"region_of\(\) returned None; it must return a str"):
        by_region.enqueue({})
    with pytest.raises(ValueError, match=r"returned 0 characters \(''\); it must return from 1"):
        by_region.enqueue({"region": ""})
    with pytest.raises(ValueError, match=r"by_shop: the RateLimit key .*<lambda>\(\) returned 600"):
        by_shop.enqueue("s" * 200)
    assert not Job.objects.exists()


@needs_flow_control
def test_what_a_callable_key_returns_is_stored():
    job = by_region.enqueue({"region": "eu"})
    assert Job.objects.get(pk=job.pk).concurrency_key == "tests.limits.by_region:eu"
    rated = by_shop.enqueue("ab", note="x")
    assert Job.objects.get(pk=rated.pk).rate_key == "tests.limits.by_shop:ababab"


def test_a_limit_given_to_using_checks_its_values_at_enqueue():
    limited = tasks.add.using(concurrency=Concurrency(key="b", limit=1))
    with pytest.raises(ValueError, match=r"add: argument 'b' is the Concurrency key, so it must"):
        limited.enqueue(1, b=None)
    assert not Job.objects.exists()


def test_every_refusal_leaves_the_transaction_usable_and_writes_nothing():
    refusals = [
        lambda: tasks.per_tenant.enqueue(None),
        lambda: tasks.per_tenant.enqueue(tenant="x" * 201),
        lambda: tasks.per_tenant.enqueue_many([("acme",), ("globex",), (1.5,)]),
        lambda: tasks.per_tenant.enqueue_many([{"tenant": "acme"}, {"tenant": {"id": 1}}]),
        lambda: tasks.per_account.using(priority=5).enqueue_many([(1,), (True,)]),
        lambda: by_region.enqueue({"region": None}),
        lambda: by_region.enqueue_many([({"region": "eu"},), ({"region": 2.0},)]),
        lambda: by_shop.enqueue(shop=""),
    ]
    with transaction.atomic():
        kept = tasks.add.enqueue(1, 2)
        for refused in refusals:
            with CaptureQueriesContext(connection) as queries, pytest.raises(ValueError):
                refused()
            assert len(queries) == 0, "refused before any SQL ran"
            # The transaction goes on: a query works, and only the kept job is in it.
            assert list(Job.objects.values_list("pk", flat=True)) == [kept.pk]
        also = tasks.add.enqueue(3, 4)
    rows = Job.objects.order_by("pk")
    assert [(row.pk, row.args) for row in rows] == [(kept.pk, [1, 2]), (also.pk, [3, 4])]


def test_a_capture_refuses_what_an_enqueue_refuses_and_keeps_the_keys():
    # capture() validates as an enqueue does, also when it writes nothing.
    with capture() as captured:
        with pytest.raises(ValueError, match=r"argument 'tenant' is the Concurrency key"):
            tasks.per_tenant.enqueue(None)
        job = tasks.per_tenant.enqueue(7)
        rated = tasks.per_account.enqueue("a")
    assert len(captured) == 2
    assert (job.concurrency_key, job.concurrency_limit, job.rate_key) == (f"{TENANT}:7", 2, None)
    assert (rated.rate_key, rated.rate_limit, rated.rate_per, rated.rate_burst) == (
        f"{ACCOUNT}:a",
        5,
        1.0,
        0,
    )
    assert not Job.objects.exists()
