"""The admin's Retry and Discard: thin callers of :class:`jobqueue.store.Store`.

The guards live in the store's one statement, not here: these only pick the selection and
report the outcome, with the same words as ``manage.py jobs retry|discard``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from jobqueue.operations import Outcome, Selection
from jobqueue.store import Store

if TYPE_CHECKING:
    from jobqueue.models import Job


@admin.action(description=_("Retry selected jobs"), permissions=["change"])
def retry(modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Job]) -> None:
    outcome = Store(queryset.db).retry_jobs(selection(request, queryset))
    report(modeladmin, request, outcome)


@admin.action(description=_("Discard selected jobs"), permissions=["change"])
def discard(
    modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Job]
) -> None:
    outcome = Store(queryset.db).discard_jobs(selection(request, queryset))
    report(modeladmin, request, outcome)


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
