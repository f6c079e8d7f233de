"""Flow control for django.tasks tasks: ``concurrency=`` and ``rate_limit=`` given to
Django's ``@task`` (Django 6.1 hands them to the backend's ``JobQueueTask``) reach the
rows, as a ``@jobqueue.task``'s do, and bad ones are ``InvalidTask`` at decoration."""

import pytest

pytest.importorskip("django.tasks", reason="django.tasks needs Django 6")

from django.tasks.exceptions import InvalidTask

from jobqueue import Concurrency, RateLimit
from jobqueue.models import Job
from jobqueue.sql import Queries
from jobqueue.store.jobs import Store
from jobqueue.tasks import base as registry
from tests.testapp import django_tasks

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not django_tasks.OPTIONS_SUPPORTED, reason="Django 6.1 hands @task options to the backend"
    ),
]
SYNC = "tests.testapp.django_tasks.sync_tenant"


@pytest.fixture(autouse=True)
def registered_tasks_are_forgotten():
    before = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(before)


@pytest.mark.skipif(
    not Queries("default").flow_control,
    reason="flow control is PostgreSQL's in this version; the enqueue refuses it here",
)
def test_the_limits_and_keys_are_stored_with_the_job():
    result = django_tasks.sync_tenant.enqueue("acme")
    row = Job.objects.get(pk=int(result.id))
    assert (row.concurrency_key, row.concurrency_limit) == (f"{SYNC}:acme", 2)
    assert (row.rate_key, row.rate_limit, row.rate_per, row.rate_burst) == (
        "dj_tenants:acme",
        5,
        1.0,
        0,
    )
    # .using() makes a new Task with the same limits.
    later = django_tasks.sync_tenant.using(priority=3).enqueue(tenant=7, full=True)
    assert Job.objects.get(pk=int(later.id)).concurrency_key == f"{SYNC}:7"
    adapter = registry.get(SYNC)
    assert adapter.options.concurrency == Concurrency(key="tenant", limit=2)


def test_the_claim_holds_a_django_task_to_its_limit(postgresql_only):
    for n in range(4):
        django_tasks.sync_tenant.enqueue("acme", full=bool(n))
    django_tasks.sync_tenant.enqueue("globex")

    def claim():
        return Store().claim(
            worker="w1", task_names=[SYNC], queues=None, excluded=(), limit=10, ahead=0
        )

    claimed = claim() or claim()  # the first look at new keys makes their rows
    # At most 2 of acme, and globex is not held back behind them (the rate limit lets
    # the first start of each key go at once).
    tenants = sorted(job.args[0] for job in claimed)
    assert tenants.count("acme") <= 2 and "globex" in tenants


def test_a_bad_key_value_is_refused_at_enqueue_naming_the_argument():
    with pytest.raises(ValueError) as raised:
        django_tasks.sync_tenant.enqueue(None)
    assert str(raised.value) == (
        f"{SYNC}: argument 'tenant' is the Concurrency key, so it must be a str or an int, "
        "not None."
    )
    assert not Job.objects.exists()


def handler(context, account_id):
    return None


def plain(*values):
    return None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"concurrency": Concurrency(key="account")},
            r"@task tests\.backend\.test_limits\.handler: the Concurrency key 'account' names "
            r"no parameter of the task \(its parameters: account_id\)\.",
        ),
        (
            {"concurrency": Concurrency(key="context")},
            r"the Concurrency key 'context' names no parameter",
        ),
        ({"rate_limit": 10}, r"handler: rate_limit must be a jobqueue\.RateLimit, not 10\."),
        (
            {"concurrency": RateLimit(limit=1)},
            r"concurrency must be a jobqueue\.Concurrency, .*given as rate_limit=",
        ),
    ],
)
def test_bad_limits_are_invalid_tasks_at_decoration(options, message):
    from django.tasks import task

    with pytest.raises(InvalidTask, match=message):
        task(takes_context=True, **options)(handler)


def test_a_key_naming_star_args_is_an_invalid_task():
    from django.tasks import task

    with pytest.raises(InvalidTask, match=r"key 'values' names the task's \*values"):
        task(concurrency=Concurrency(key="values"))(plain)
