import factory
from django.utils import timezone

from jobqueue.models import Job


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
