from django.apps import AppConfig


class JobQueueConfig(AppConfig):
    name = "jobqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobqueue import checks, sql  # noqa: F401 - registers checks and signal receivers
