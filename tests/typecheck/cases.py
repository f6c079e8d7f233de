"""Right and wrong calls of typed tasks, for mypy in the lint job; never imported or run.

Every wrong call carries ``# type: ignore[<code>]``. mypy runs with ``warn_unused_ignores``,
so an ignore that covers no error fails the check: a wrong call that mypy stopped reporting
(say, ``@task`` typed ``Any`` again) fails as surely as a right call that it reports.
"""

from collections.abc import Coroutine
from typing import Any, assert_type

from jobqueue import Concurrency, JobContext, RateLimit, task
from jobqueue.models import Job
from jobqueue.tasks import Call, Task


@task
def send_welcome(email: str) -> None: ...


@task(queue="emails", max_attempts=5, priority=10)
def add(a: int, b: int = 0) -> int:
    return a + b


@task(takes_context=True, timeout=30)
def build_feed(ctx: JobContext, shop_id: int) -> dict[str, int]:
    assert_type(ctx.attempt, int)
    assert_type(ctx.job_id, int)
    assert_type(ctx.job, Job)
    ctx.cancelled.is_set()
    ctx.attempt = "second"  # type: ignore[assignment]
    return {"shop": shop_id, "attempt": ctx.attempt}


@task
async def fetch(url: str) -> bytes:
    return url.encode()


def handler(email: str) -> None: ...


# -- bare @task: the function's parameters ------------------------------------------------

welcome: Task[[str], None] = send_welcome
assert_type(send_welcome.enqueue("ada@example.com"), Job | None)
send_welcome.enqueue(email="ada@example.com")
send_welcome.enqueue(42)  # type: ignore[arg-type]
send_welcome.enqueue(email=42)  # type: ignore[arg-type]
send_welcome.enqueue()  # type: ignore[call-arg]
send_welcome.enqueue("ada@example.com", "grace@example.com")  # type: ignore[call-arg]
send_welcome.enqueue(mail="ada@example.com")  # type: ignore[call-arg]

# -- @task(...) with options ---------------------------------------------------------------

add.enqueue(1)
add.enqueue(1, b=2)
add.enqueue("1")  # type: ignore[arg-type]
add.enqueue(1, b="2")  # type: ignore[arg-type]
assert_type(add(1, 2), int)  # called directly, it runs here
add("1")  # type: ignore[arg-type]
assert_type(task(handler, queue="emails").enqueue("ada@example.com"), Job | None)  # a call
task(handler, queue="emails").enqueue(42)  # type: ignore[arg-type]


@task(priority="high")  # type: ignore[call-overload]
def bad_option() -> None: ...


# -- .using(...): the same parameters --------------------------------------------------------

assert_type(add.using(delay=60).enqueue(1, 2), Job | None)
add.using(delay=60).enqueue("1")  # type: ignore[arg-type]
add.using(priority=1).using(queue="other").enqueue(1, b="2")  # type: ignore[arg-type]
add.using(delay="soon")  # type: ignore[arg-type]

# -- enqueue_many: items are tuples, dicts or Calls, their arguments checked at run time ----

assert_type(add.enqueue_many([(1, 2), {"a": 3}, Call((4,))]), list[Job | None])
add.using(queue="other").enqueue_many([(1, 2)])
add.enqueue_many([[1, 2]])  # type: ignore[list-item]

# -- takes_context=True: the context is the worker's, not an enqueue argument ---------------

feed: Task[[int], dict[str, int]] = build_feed
build_feed.enqueue(7)
build_feed.using(delay=5).enqueue(shop_id=7)
build_feed.enqueue("7")  # type: ignore[arg-type]
build_feed.enqueue(1, 7)  # type: ignore[call-arg]


@task(takes_context=True)  # type: ignore[arg-type]
def no_context() -> None: ...  # a context task needs a first parameter for the context


# takes_context known only at run time: the task is not checked, and not refused either.
flag = bool(len(__name__))
assert_type(task(takes_context=flag), Any)

# -- async def handlers --------------------------------------------------------------------

fetching: Task[[str], Coroutine[Any, Any, bytes]] = fetch
fetch.enqueue("https://example.com")
fetch.enqueue(b"https://example.com")  # type: ignore[arg-type]

# -- flow control: concurrency= and rate_limit= keep the task's parameters typed -------------


@task(queue="sync", concurrency=Concurrency(key="tenant_id", limit=2))
def sync_tenant(tenant_id: int, full: bool = False) -> None: ...


@task(
    takes_context=True,
    concurrency=Concurrency(key="account_id", limit=1, group="stripe"),
    rate_limit=RateLimit(key="account_id", limit=25, per=1.0, group="stripe"),
)
def refund(ctx: JobContext, account_id: int, charge: str) -> None: ...


syncing: Task[[int, bool], None] = sync_tenant
sync_tenant.enqueue(7, full=True)
sync_tenant.enqueue("7")  # type: ignore[arg-type]
refund.enqueue(3, "ch_1")
refund.enqueue(3, 1)  # type: ignore[arg-type]
sync_tenant.using(rate_limit=RateLimit(key=lambda tenant_id, full=False: tenant_id, limit=5))
sync_tenant.using(concurrency=Concurrency(limit=1)).enqueue(7)
sync_tenant.using(concurrency=Concurrency(limit=1)).enqueue("7")  # type: ignore[arg-type]
sync_tenant.using(concurrency=2)  # type: ignore[arg-type]
sync_tenant.using(rate_limit=Concurrency())  # type: ignore[arg-type]
Concurrency("tenant_id", 2)  # type: ignore[call-arg]  # keyword-only
RateLimit(key="account_id")  # type: ignore[call-arg]


@task(concurrency=2)  # type: ignore[call-overload]
def bad_concurrency() -> None: ...


@task(rate_limit=Concurrency())  # type: ignore[call-overload]
def bad_rate_limit() -> None: ...
