"""The admin's Retry and Discard: thin callers of :class:`jobqueue.store.Store`.

The guards live in the store's one statement, not here: these only pick the selection and
report the outcome, with the same words as ``manage.py jobs retry|discard``. Retry is one
click; Discard first shows a confirmation page (as Django's "delete selected" does) that
lists the jobs and says which are running, and acts when that page is posted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import django
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from jobqueue import states
from jobqueue.console.display import status_badge
from jobqueue.store.jobs import Store
from jobqueue.store.operations import Outcome, Selection

# The confirmation page names at most this many jobs, the newest first, and counts the rest.
LISTED = 100

if TYPE_CHECKING:
    from jobqueue.models import Job


@admin.action(description=_("Retry selected jobs"), permissions=["change"])
def retry(modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Job]) -> None:
    outcome = Store(queryset.db).retry_jobs(selection(request, queryset))
    report(modeladmin, request, outcome)


@admin.action(description=_("Discard selected jobs"), permissions=["change"])
def discard(
    modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Job]
) -> TemplateResponse | None:
    if request.POST.get("post") != "yes":
        across = request.POST.get("select_across") == "1"
        hidden = [("action", "discard"), ("index", "0"), ("post", "yes")]
        hidden.append(("select_across", "1" if across else "0"))
        # The ticked boxes even with "select all": the changelist runs no action without one.
        hidden += [
            (helpers.ACTION_CHECKBOX_NAME, pk)
            for pk in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        ]
        # Posted back to the changelist's own address, so its filter and search still hold.
        path = request.get_full_path()
        return confirm_discard(modeladmin, request, queryset, hidden, path, path)
    outcome = Store(queryset.db).discard_jobs(selection(request, queryset))
    report(modeladmin, request, outcome)
    return None


def confirm_discard(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Job],
    hidden: list[tuple[str, str]],
    form_url: str,
    cancel_url: str,
) -> TemplateResponse:
    """The page that asks before a Discard: which jobs, how many, which of them run now."""
    site = modeladmin.admin_site
    count = queryset.count()
    listed = [
        (job, reverse(f"{site.name}:jobqueue_job_change", args=[job.pk]), status_badge(job.status))
        for job in queryset.order_by("-pk")[:LISTED]
    ]
    context = {
        **site.each_context(request),
        "title": _("Discard jobs"),
        "breadcrumbs_ol": django.VERSION >= (6, 1),
        "opts": modeladmin.opts,
        "count": count,
        "running": queryset.filter(status=states.RUNNING).count(),
        "succeeded": queryset.filter(status=states.SUCCEEDED).count(),
        "listed": listed,
        "more": max(count - len(listed), 0),
        "hidden": hidden,
        "form_url": form_url,
        "cancel_url": cancel_url,
        "changelist_url": reverse(f"{site.name}:jobqueue_job_changelist"),
    }
    request.current_app = site.name
    return TemplateResponse(request, "admin/jobqueue/job/discard_confirmation.html", context)


def selection(request: HttpRequest, queryset: QuerySet[Job]) -> Selection:
    """The ticked ids as one list parameter, or the whole filtered queryset as SQL.

    "Select all" hands over the changelist's filter, compiled into the statement, so however
    many jobs match, nothing is loaded into Python.
    """
    if request.POST.get("select_across") != "1":
        ids = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        if ids and all(pk.isdigit() for pk in ids):
            return [int(pk) for pk in ids]
    return queryset


def report(modeladmin: admin.ModelAdmin[Any], request: HttpRequest, outcome: Outcome) -> None:
    if outcome.skipped_count:
        level = messages.WARNING
    elif outcome.done:
        level = messages.SUCCESS
    else:
        level = messages.INFO
    modeladmin.message_user(request, outcome.message(), level)
