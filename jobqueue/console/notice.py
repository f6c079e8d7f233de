"""The admin notice while abandoned jobs wait for an operator.

No worker ever retries an abandoned job, so one is invisible until somebody looks. The
middleware adds a warning to every admin page a user who may view jobs opens: not on AJAX
requests, and only to a page that is about to be rendered, so the message is shown at once
and never piles up across redirects. The count is cached for a minute; Retry and Discard
drop the cache (through their signals), so the operator sees the effect at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.core import checks
from django.core.cache import cache
from django.db import transaction
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.translation import ngettext

from jobqueue import signals, states

CACHE_KEY = "jobqueue:admin:abandoned-count"
CACHE_SECONDS = 60
MIDDLEWARE = "jobqueue.notice.AbandonedJobsMiddleware"


def abandoned_count() -> int:
    """How many jobs are abandoned, read at most once a minute."""
    count = cache.get(CACHE_KEY)
    if count is None:
        # Imported here: this module may load before the app registry is ready.
        from jobqueue.models import Job

        count = Job.objects.filter(status=states.ABANDONED).count()
        cache.set(CACHE_KEY, count, CACHE_SECONDS)
    return int(count)


def forget_count() -> None:
    cache.delete(CACHE_KEY)


@receiver(signals.jobs_retried)
@receiver(signals.jobs_discarded)
def _operator_acted(sender: Any, using: str, **kwargs: Any) -> None:
    # Drop it now and again at commit: inside a transaction, a page rendered before the
    # commit would otherwise cache the count the operator just changed.
    forget_count()
    transaction.on_commit(forget_count, using=using)


def may_view_jobs(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    if user is None or not user.is_active or not user.is_staff:
        return False
    return bool(user.has_perm("jobqueue.view_job") or user.has_perm("jobqueue.change_job"))


class AbandonedJobsMiddleware:
    """Add the abandoned-jobs warning to every admin page about to be rendered."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_template_response(
        self, request: HttpRequest, response: TemplateResponse
    ) -> TemplateResponse:
        match = request.resolver_match
        if (
            match is not None
            and match.app_name == "admin"
            and request.method in ("GET", "HEAD")
            and request.headers.get("x-requested-with") != "XMLHttpRequest"
            and IS_POPUP_VAR not in request.GET
            and hasattr(request, "_messages")
            and may_view_jobs(request)
        ):
            count = abandoned_count()
            if count:
                messages.warning(request, notice(count, match.namespace))
        return response


def notice(count: int, site: str = "admin") -> str:
    """The warning text, linking to the abandoned jobs."""
    text = ngettext(
        "%(count)d job is abandoned: its worker died while running it, and no worker will "
        "run it again until you retry or discard it.",
        "%(count)d jobs are abandoned: their workers died while running them, and no worker "
        "will run them again until you retry or discard them.",
        count,
    ) % {"count": count}
    try:
        url = reverse(f"{site}:jobqueue_job_changelist") + f"?status__exact={states.ABANDONED}"
    except NoReverseMatch:
        return text
    return format_html(
        '{} <a href="{}" class="jobqueue-abandoned-link">{}</a>',
        text,
        url,
        ngettext("Review it", "Review them", count),
    )


@checks.register(checks.Tags.admin)
def check_middleware(**kwargs: Any) -> list[checks.CheckMessage]:
    if MIDDLEWARE in settings.MIDDLEWARE:
        return []
    return [
        checks.Warning(
            f"{MIDDLEWARE!r} is not in MIDDLEWARE, so the admin shows no notice while "
            "abandoned jobs wait for an operator.",
            hint=f"Add {MIDDLEWARE!r} to MIDDLEWARE, after MessageMiddleware.",
            id="jobqueue.W003",
        )
    ]
