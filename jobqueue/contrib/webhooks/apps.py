from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "jobqueue.contrib.webhooks"
    # Not "webhooks": a project may well have an app of that name already.
    label = "jobqueue_webhooks"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobqueue.contrib.webhooks import checks  # noqa: F401 - registers the check
