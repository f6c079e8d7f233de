from django.apps import AppConfig
from django.core import checks


class SentryConfig(AppConfig):
    name = "jobqueue.contrib.sentry"
    # Not "sentry": a project may have an app of that name already.
    label = "jobqueue_sentry"
    verbose_name = "Sentry reporting"

    def ready(self) -> None:
        from jobqueue.contrib.sentry import report

        # Registered here, not at import: only a project that installs the app is checked.
        checks.register(report.check_sentry_sdk)
        report.connect()
