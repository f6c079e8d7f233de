import datetime as dt

import factory
from django.utils import timezone

from jobqueue.models import Job, MinuteStat, Worker
from jobqueue.store import stats


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    task_name = "tests.testapp.tasks.add"
    queue = "default"
    args = factory.LazyFunction(lambda: [1, 2])
    kwargs = factory.LazyFunction(dict)
    run_at = factory.LazyFunction(timezone.now)
    max_attempts = 3


class FinishedJobFactory(JobFactory):
    status = "succeeded"
    attempts = 1
    finished_at = factory.LazyFunction(timezone.now)


class WorkerFactory(factory.django.DjangoModelFactory):
    """A worker row; ``heartbeat_age`` seconds since its last heartbeat (0: live now)."""

    class Meta:
        model = Worker

    class Params:
        heartbeat_age = 0.0

    id = factory.Sequence(lambda n: f"web-1:{n}:test")
    hostname = "web-1"
    pid = 10
    pool = "default"
    queues = factory.LazyFunction(lambda: {"queues": None, "excluded": []})
    tasks = factory.LazyFunction(list)
    concurrency = 1
    last_heartbeat = factory.LazyAttribute(
        lambda o: timezone.now() - dt.timedelta(seconds=o.heartbeat_age)
    )


def minute_stat(
    minute: dt.datetime,
    task_name: str = "tests.testapp.tasks.add",
    outcome: str = "succeeded",
    count: int = 1,
    seconds: float = 0.2,
    queue: str = "default",
) -> MinuteStat:
    """A saved stat row of ``count`` events, each of ``seconds`` (their histogram bucket)."""
    row = MinuteStat(
        minute=minute.replace(second=0, microsecond=0),
        queue=queue,
        task_name=task_name,
        outcome=outcome,
        count=count,
        seconds=seconds * count,
    )
    setattr(row, stats.COLUMNS[stats.bucket_of(seconds)], count)
    row.save()
    return row
