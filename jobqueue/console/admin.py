"""The operator's admin: read-only job pages, Retry and Discard, queues, live workers and
schedules (with Run now, Pause and Resume).

Nobody edits a job by hand: every page is read-only, and the only changes are the two
actions (and the matching buttons on a job's page), which go through
:class:`jobqueue.store.Store` like every other status change.
"""

from __future__ import annotations

import datetime as dt
from functools import cached_property
from typing import Any

import django
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods, require_POST

from jobqueue import conf, states
from jobqueue.console import actions, dashboard, display, history, notice, overview
from jobqueue.models import Dashboard, Job, QueueSummary, Schedule, Worker
from jobqueue.runtime.queues import QueueSelection
from jobqueue.schedules import spec as schedule_spec
from jobqueue.schedules import state as schedule_state
from jobqueue.schedules.spec import KEY_PREFIX, ScheduleSpec
from jobqueue.sql import Queries
from jobqueue.states import DISCARDABLE, RETRYABLE
from jobqueue.store import pauses
from jobqueue.store.jobs import Store


class EstimatedCountPaginator(Paginator):
    """Exact counts, except for the whole of a large table on PostgreSQL.

    ``count(*)`` over millions of finished rows reads them all; the planner's estimate
    (``pg_class.reltuples``, kept by autovacuum) is free and close enough to number pages.
    A filtered list is counted exactly: its filter has an index to use.
    """

    ESTIMATE_ABOVE = 10_000

    @cached_property
    def count(self) -> int:
        estimate = planner_estimate(self.object_list)
        if estimate is not None and estimate > self.ESTIMATE_ABOVE:
            return estimate
        return super().count


def planner_estimate(queryset: Any) -> int | None:
    """PostgreSQL's row estimate for an unfiltered queryset's table, or ``None``."""
    if not isinstance(queryset, QuerySet) or queryset.query.has_filters():
        return None
    return Queries(queryset.db).estimated_rows(queryset.model._meta.db_table)


class ReadOnlyMixin:
    """No adding, no editing, no deleting: the store owns every change."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class JobsPageMixin:
    """A page of figures about the jobs, not a table to edit: whoever may view jobs sees it
    (``notice.may_view_jobs``), nobody adds, changes or deletes through it."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return notice.may_view_jobs(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "task",
        "queue_name",
        "status_and_attempts",
        "run_at_time",
        "updated_at_time",
        "error",
    )
    list_display_links = ("id", "task")
    list_filter = ("status", "queue", "task_name", "enqueued_at", "finished_at")
    search_fields = ("task_name", "=idempotency_key")
    search_help_text = _("Search by id, task name (or part of it) or idempotency key.")
    list_per_page = 50
    empty_value_display = display.EMPTY
    # The "(N total)" link would count the whole table on every filtered page.
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    actions = (actions.retry, actions.discard)
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("id", "status_badge"),
                    ("task_name", "queue", "priority"),
                    ("attempts_of", "crashes", "on_crash"),
                    ("run_at_time", "idempotency_key"),
                    "error",
                )
            },
        ),
        (_("Arguments and result"), {"fields": ("args_json", "kwargs_json", "result_json")}),
        (_("Errors"), {"fields": ("errors_html",)}),
        (_("Steps done"), {"fields": ("steps_html",)}),
        (_("Timeline"), {"fields": ("timeline_html",)}),
        (_("Owner"), {"fields": (("worker", "lease_until_time"),)}),
        (
            _("Limits"),
            {
                "fields": (
                    ("concurrency_key", "concurrency_limit"),
                    ("rate_key", "rate_limit", "rate_per", "rate_burst"),
                ),
                "classes": ("collapse",),
            },
        ),
    )
    readonly_fields = (
        "id",
        "status_badge",
        "task_name",
        "queue",
        "priority",
        "attempts_of",
        "crashes",
        "on_crash",
        "run_at_time",
        "idempotency_key",
        "error",
        "args_json",
        "kwargs_json",
        "result_json",
        "errors_html",
        "steps_html",
        "timeline_html",
        "worker",
        "lease_until_time",
        "concurrency_key",
        "concurrency_limit",
        "rate_key",
        "rate_limit",
        "rate_per",
        "rate_burst",
    )

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        # The change permission is what the actions need; a job's page itself is only ever
        # shown read-only, so nobody can save a job's fields by hand.
        if obj is not None:
            return False
        return super().has_change_permission(request)

    # -- columns -------------------------------------------------------------------------

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, job: Job) -> SafeString:
        return display.status_badge(job.status)

    @admin.display(description=_("attempts"), ordering="attempts")
    def attempts_of(self, job: Job) -> str:
        return f"{job.attempts} / {job.max_attempts}"

    @admin.display(description=_("task"), ordering="task_name")
    def task(self, job: Job) -> SafeString:
        return display.task_name(job.task_name)

    @admin.display(description=_("queue"), ordering="queue")
    def queue_name(self, job: Job) -> SafeString:
        return display.clipped(job.queue, "jobqueue-queue")

    @admin.display(description=_("status"), ordering="status")
    def status_and_attempts(self, job: Job) -> SafeString:
        # One column for three: the changelist fits 1,400 px with the sidebars open.
        return display.status_and_attempts(job)

    @admin.display(description=_("run at"), ordering="run_at")
    def run_at_time(self, job: Job) -> SafeString:
        return display.moment(job.run_at)

    @admin.display(description=_("updated at"), ordering="updated_at")
    def updated_at_time(self, job: Job) -> SafeString:
        return display.moment(job.updated_at)

    @admin.display(description=_("lease until"))
    def lease_until_time(self, job: Job) -> SafeString:
        return display.moment(job.lease_until)

    @admin.display(description=_("last error"))
    def error(self, job: Job) -> SafeString:
        return display.clipped(job.last_error, "jobqueue-error")

    @admin.display(description=_("args"))
    def args_json(self, job: Job) -> SafeString:
        return display.pretty_json(job.args)

    @admin.display(description=_("kwargs"))
    def kwargs_json(self, job: Job) -> SafeString:
        return display.pretty_json(job.kwargs)

    @admin.display(description=_("result"))
    def result_json(self, job: Job) -> SafeString:
        return display.pretty_json(job.result)

    @admin.display(description=_("errors"))
    def errors_html(self, job: Job) -> SafeString:
        return display.errors(job)

    @admin.display(description=_("steps"))
    def steps_html(self, job: Job) -> SafeString:
        return display.steps(job)

    @admin.display(description=_("timeline"))
    def timeline_html(self, job: Job) -> SafeString:
        return display.timeline(job)

    # -- search --------------------------------------------------------------------------

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        if "\x00" in search_term:
            # PostgreSQL refuses a NUL in any text parameter, and no name or key holds one.
            return queryset.none(), False
        results, duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip().lstrip("#")
        # isascii(): "²".isdigit() is True and int("²") raises. Ids are 64-bit: a longer
        # number is none, and PostgreSQL refuses to compare a bigint with it.
        if term.isascii() and term.isdigit() and len(term) <= 19 and int(term) < 2**63:
            results |= queryset.filter(pk=int(term))
        return results, duplicates

    # -- pages ---------------------------------------------------------------------------

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        changelist = reverse(f"{self.admin_site.name}:jobqueue_job_changelist")
        context = {
            "title": _("Jobs"),
            "jobqueue_failed_url": f"{changelist}?status__exact={states.FAILED}",
            "jobqueue_abandoned_url": f"{changelist}?status__exact={states.ABANDONED}",
            "jobqueue_abandoned_count": notice.abandoned_count(),
            "jobqueue_queues_url": reverse(
                f"{self.admin_site.name}:jobqueue_queuesummary_changelist"
            ),
            "jobqueue_workers_url": reverse(f"{self.admin_site.name}:jobqueue_worker_changelist"),
            "jobqueue_schedules_url": reverse(
                f"{self.admin_site.name}:jobqueue_schedule_changelist"
            ),
            "jobqueue_dashboard_url": reverse(
                f"{self.admin_site.name}:jobqueue_dashboard_changelist"
            ),
            **(extra_context or {}),
        }
        return super().changelist_view(request, context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        job = self.get_object(request, object_id)
        if job is not None:
            context.setdefault("title", job_title(job))
        if job is not None and job.status == states.PENDING:
            # Why this job may wait forever, said where an operator looks for it.
            reason = overview.why_unclaimed(job.task_name, using=self.get_queryset(request).db)
            context["jobqueue_unclaimed"] = display.unclaimed_notice(reason)
        if job is not None and super().has_change_permission(request):
            context["jobqueue_retry_url"] = self._url("retry", job) if can_retry(job) else None
            context["jobqueue_discard_url"] = (
                self._url("discard", job) if job.status in DISCARDABLE else None
            )
        return super().change_view(request, object_id, form_url, context)

    def _url(self, action: str, job: Job) -> str:
        return reverse(f"{self.admin_site.name}:jobqueue_job_{action}", args=[job.pk])

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path(
                "<int:object_id>/retry/",
                wrap(require_POST(self.retry_view)),
                name="jobqueue_job_retry",
            ),
            path(
                "<int:object_id>/discard/",
                wrap(require_http_methods(["GET", "POST"])(self.discard_view)),
                name="jobqueue_job_discard",
            ),
            *super().get_urls(),
        ]

    def retry_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return self._operate(request, object_id, "retry")

    def discard_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """GET: the confirmation page; POST (its Confirm): the discard."""
        if request.method == "POST":
            return self._operate(request, object_id, "discard")
        if not super().has_change_permission(request):
            raise PermissionDenied
        jobs = self.get_queryset(request)
        job = get_object_or_404(jobs, pk=object_id)
        url = self._url("discard", job)
        back = reverse(f"{self.admin_site.name}:jobqueue_job_change", args=[job.pk])
        return actions.confirm_discard(self, request, jobs.filter(pk=job.pk), [], url, back)

    def _operate(self, request: HttpRequest, object_id: int, action: str) -> HttpResponse:
        """One job's Retry or Discard button: the same store call as the actions."""
        if not super().has_change_permission(request):
            raise PermissionDenied
        jobs = self.get_queryset(request)
        job = get_object_or_404(jobs, pk=object_id)
        store = Store(jobs.db)
        outcome = store.retry_jobs([job.pk]) if action == "retry" else store.discard_jobs([job.pk])
        actions.report(self, request, outcome)
        return HttpResponseRedirect(
            reverse(f"{self.admin_site.name}:jobqueue_job_change", args=[job.pk])
        )


def job_title(job: Job) -> str:
    """A job page's title: "Job #123 (send_welcome)", the task's name without its module."""
    return gettext("Job #%(id)s (%(task)s)") % {
        "id": job.pk,
        "task": job.task_name.rpartition(".")[2] or job.task_name,
    }


def can_retry(job: Job) -> bool:
    """Whether the Retry button makes sense now (the store decides again when it is pressed)."""
    if job.status not in RETRYABLE:
        return False
    return job.lease_until is None or job.lease_until < timezone.now()


@admin.register(Worker)
class WorkerAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "hostname",
        "pid",
        "pool",
        "served_queues",
        "concurrency",
        "held_jobs",
        "started",
        "heartbeat",
        "alive",
    )
    list_filter = ("pool", "hostname")
    search_fields = ("id", "hostname")

    def has_change_permission(self, request: HttpRequest, obj: Worker | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Worker]:
        held = (
            Job.objects.filter(status=states.RUNNING, worker=OuterRef("pk"))
            .order_by()
            .values("worker")
            .annotate(n=Count("id"))
            .values("n")
        )
        return (
            super()
            .get_queryset(request)
            .annotate(held=Coalesce(Subquery(held, output_field=IntegerField()), Value(0)))
        )

    @admin.display(description=_("queues"))
    def served_queues(self, worker: Worker) -> str:
        selection = QueueSelection.from_row(worker.queues)
        return selection.describe(sep=", ", but=str(_("except"))) if selection else ""

    @admin.display(description=_("jobs held"), ordering="held")
    def held_jobs(self, worker: Worker) -> SafeString:
        url = reverse(f"{self.admin_site.name}:jobqueue_job_changelist")
        query = urlencode({"status__exact": states.RUNNING, "worker": worker.pk})
        return format_html('<a href="{}?{}">{}</a>', url, query, worker.held)  # type: ignore[attr-defined]

    @admin.display(description=_("started at"), ordering="started_at")
    def started(self, worker: Worker) -> SafeString:
        return display.moment(worker.started_at)

    @admin.display(description=_("last heartbeat"), ordering="last_heartbeat")
    def heartbeat(self, worker: Worker) -> SafeString:
        return display.moment(worker.last_heartbeat)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, {"title": _("Workers"), **(extra_context or {})})

    @admin.display(description=_("alive"), boolean=True)
    def alive(self, worker: Worker) -> bool:
        lease = dt.timedelta(seconds=conf.get().lease)
        return worker.last_heartbeat > timezone.now() - lease


@admin.register(QueueSummary)
class QueueSummaryAdmin(JobsPageMixin, admin.ModelAdmin):
    """Per queue: its pool and its jobs by state, the figures of ``manage.py jobs queues``."""

    def may_pause(self, request: HttpRequest) -> bool:
        """Pause and Resume need the permission the job actions need: ``change_job``."""
        return self.has_view_permission(request) and request.user.has_perm("jobqueue.change_job")

    def get_urls(self) -> list[URLPattern]:
        info = (self.opts.app_label, self.opts.model_name)
        wrap = self.admin_site.admin_view
        return [
            path("", wrap(self.changelist_view), name="{}_{}_changelist".format(*info)),
            path(
                "retry-failed/",
                wrap(require_POST(self.retry_failed_view)),
                name="{}_{}_retry_failed".format(*info),
            ),
            path("pause/", wrap(require_POST(self.pause_view)), name="{}_{}_pause".format(*info)),
        ]

    def pause_view(self, request: HttpRequest) -> HttpResponse:
        """One queue's Pause or Resume, posted from its row."""
        if not self.may_pause(request):
            raise PermissionDenied
        queue = request.POST.get("queue", "")
        action = request.POST.get("action", "")
        using = Job.objects.db
        try:
            if action == "pause":
                by = request.user.get_username() or "the admin"
                change = pauses.pause([queue], by=by, using=using)
                text = (
                    _(
                        'Paused queue "%(queue)s": its jobs are still enqueued, but no worker '
                        "claims them, on any host, until you resume it."
                    )
                    if change.changed
                    else _('Queue "%(queue)s" was already paused.')
                )
            elif action == "resume":
                change = pauses.resume([queue], using=using)
                text = (
                    _('Resumed queue "%(queue)s": its workers claim its due jobs now.')
                    if change.changed
                    else _('Queue "%(queue)s" was not paused.')
                )
            else:
                self.message_user(request, _("Unknown action %r.") % action, messages.ERROR)
                return HttpResponseRedirect(self._overview_url())
        except ValueError as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            self.message_user(request, text % {"queue": queue}, messages.SUCCESS)
        return HttpResponseRedirect(self._overview_url())

    def _overview_url(self) -> str:
        return reverse(f"{self.admin_site.name}:jobqueue_queuesummary_changelist")

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        jobs_url = reverse(f"{self.admin_site.name}:jobqueue_job_changelist")
        using = self.get_queryset(request).db
        may_retry = request.user.has_perm("jobqueue.change_job")
        failed = states.FAILED

        def link(queue: str, status: str | None = None) -> str:
            query = {"queue": queue, **({"status__exact": status} if status else {})}
            return f"{jobs_url}?{urlencode(query)}"

        rows = [
            {
                "queue": row.queue,
                "pool": row.pool,
                "url": link(row.queue),
                "cells": [
                    (row.due, link(row.queue, states.PENDING)),
                    (row.scheduled, link(row.queue, states.PENDING)),
                    (row.running, link(row.queue, states.RUNNING)),
                    (row.failed, link(row.queue, states.FAILED)),
                    (row.abandoned, link(row.queue, states.ABANDONED)),
                ],
                "oldest_due": row.oldest_due_seconds,
                "failed": row.failed,
                "paused": row.paused,
            }
            for row in overview.queue_rows()
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": _("Queues"),
            "opts": self.opts,
            "columns": [_("due"), _("scheduled"), _("running"), _("failed"), _("abandoned")],
            "rows": rows,
            "workers_url": reverse(f"{self.admin_site.name}:jobqueue_worker_changelist"),
            "schedules_url": reverse(f"{self.admin_site.name}:jobqueue_schedule_changelist"),
            "dashboard_url": reverse(f"{self.admin_site.name}:jobqueue_dashboard_changelist"),
            "jobs_url": jobs_url,
            "may_pause": self.may_pause(request),
            "pause_url": reverse(f"{self.admin_site.name}:jobqueue_queuesummary_pause"),
            # admin/change_list.html's breadcrumbs read the model's names from cl.opts.
            "cl": ChangeListNames(self.opts),
            "may_retry": may_retry,
            "retry_failed_url": reverse(
                f"{self.admin_site.name}:jobqueue_queuesummary_retry_failed"
            ),
            "failed_tasks": [
                (task, n, f"{jobs_url}?{urlencode({'status__exact': failed, 'task_name': task})}")
                for task, n in overview.failed_by_task(using)
            ]
            if may_retry
            else [],
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/jobqueue/queuesummary/overview.html", context)

    def retry_failed_view(self, request: HttpRequest) -> HttpResponse:
        """Retry all failed jobs of one queue or one task: one statement, whose selection
        (status failed, in the statement itself) and guards are Retry's."""
        if not request.user.has_perm("jobqueue.change_job"):
            raise PermissionDenied
        jobs = Job.objects.using(self.get_queryset(request).db).filter(status=states.FAILED)
        queue, task = request.POST.get("queue"), request.POST.get("task")
        if queue and not task:
            outcome = Store(jobs.db).retry_jobs(jobs.filter(queue=queue))
            prefix = gettext('Queue "%(name)s": ') % {"name": queue}
        elif task and not queue:
            outcome = Store(jobs.db).retry_jobs(jobs.filter(task_name=task))
            prefix = gettext('Task "%(name)s": ') % {"name": task}
        else:
            self.message_user(
                request, gettext("Say which queue or which task to retry."), messages.ERROR
            )
            return HttpResponseRedirect(request.path.rsplit("retry-failed/", 1)[0])
        level = messages.WARNING if outcome.skipped_count else messages.SUCCESS
        if not outcome.done and not outcome.skipped_count:
            level = messages.INFO
        self.message_user(request, prefix + outcome.message(), level)
        return HttpResponseRedirect(
            reverse(f"{self.admin_site.name}:jobqueue_queuesummary_changelist")
        )


@admin.register(Dashboard)
class DashboardAdmin(JobsPageMixin, admin.ModelAdmin):
    """Charts of the last 1 h / 24 h / 7 d, the tasks' figures and the workers
    (:mod:`jobqueue.dashboard`); read-only, for whoever may view jobs."""

    def get_urls(self) -> list[URLPattern]:
        info = (self.opts.app_label, self.opts.model_name)
        return [
            path(
                "",
                self.admin_site.admin_view(self.changelist_view),
                name="{}_{}_changelist".format(*info),
            )
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        range_key = request.GET.get("range", history.DEFAULT_RANGE)
        if range_key not in history.RANGES:
            range_key = history.DEFAULT_RANGE
        url = reverse(f"{self.admin_site.name}:jobqueue_dashboard_changelist")
        context = {
            **self.admin_site.each_context(request),
            **dashboard.context(range_key, Job.objects.db),
            "title": _("Dashboard"),
            "opts": self.opts,
            "url": url,
            "jobs_url": reverse(f"{self.admin_site.name}:jobqueue_job_changelist"),
            "queues_url": reverse(f"{self.admin_site.name}:jobqueue_queuesummary_changelist"),
            "workers_url": reverse(f"{self.admin_site.name}:jobqueue_worker_changelist"),
            "breadcrumbs_ol": django.VERSION >= (6, 1),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/jobqueue/dashboard/overview.html", context)


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """The schedules, with the figures of ``manage.py jobs schedules``, and Run now, Pause and
    Resume. Nothing else changes a schedule here: its definition lives in settings, and its
    ticks are the workers' to advance. Who may look and act follows the ``Schedule``
    permissions as the job pages follow the ``Job`` ones: view to see, change to act."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        info = (self.opts.app_label, self.opts.model_name)
        wrap = self.admin_site.admin_view
        return [
            path("", wrap(self.changelist_view), name="{}_{}_changelist".format(*info)),
            path("act/", wrap(require_POST(self.act_view)), name="{}_{}_act".format(*info)),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        using = self.get_queryset(request).db
        jobs_url = reverse(f"{self.admin_site.name}:jobqueue_job_changelist")
        rows = [
            {
                "row": row,
                "job_url": self._job_url(row.last_job_id, row.last_job_status),
                "job_badge": display.status_badge(row.last_job_status or ""),
                "runs_url": f"{jobs_url}?{urlencode({'q': KEY_PREFIX + row.name})}",
                "next_tick": display.tick(row.next_tick),
                "next_tick_iso": row.next_tick.isoformat() if row.next_tick else "",
                "last_tick": display.tick(row.last_tick),
                "last_tick_iso": row.last_tick.isoformat() if row.last_tick else "",
                "last_skipped": display.tick(row.last_skipped_at),
                "last_skipped_iso": row.last_skipped_at.isoformat() if row.last_skipped_at else "",
                "notes": [
                    {"text": note, "warn": note == overview.NOT_IN_SETTINGS} for note in row.notes
                ],
            }
            for row in overview.schedule_rows(using=using)
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": _("Schedules"),
            "opts": self.opts,
            "columns": [
                _("schedule"),
                _("task"),
                _("expression"),
                _("time zone"),
                _("next tick"),
                _("last tick"),
                _("last job"),
                _("skipped"),
                _("notes"),
            ],
            "rows": rows,
            "may_act": self.has_change_permission(request),
            "act_url": reverse(f"{self.admin_site.name}:jobqueue_schedule_act"),
            "jobs_url": jobs_url,
            "queues_url": reverse(f"{self.admin_site.name}:jobqueue_queuesummary_changelist"),
            "cl": ChangeListNames(self.opts),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/jobqueue/schedule/overview.html", context)

    def _job_url(self, job_id: int | None, status: str | None) -> str | None:
        if job_id is None or status is None:  # no run yet, or pruned: no page to link
            return None
        return reverse(f"{self.admin_site.name}:jobqueue_job_change", args=[job_id])

    def act_view(self, request: HttpRequest) -> HttpResponse:
        """One schedule's Run now, Pause or Resume, posted from its row."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        name = request.POST.get("schedule", "")
        action = request.POST.get("action", "")
        using = self.get_queryset(request).db
        if action == "run_now":
            self._run_now(request, name, using)
        elif action in ("pause", "resume"):
            self._pause(request, name, action == "pause", using)
        else:
            self.message_user(request, _("Unknown action %r.") % action, messages.ERROR)
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:jobqueue_schedule_changelist"))

    def _run_now(self, request: HttpRequest, name: str, using: str) -> None:
        configured = {s.name: s for s in schedule_spec.load(conf.get())}
        if name not in configured:
            if Schedule.objects.using(using).filter(name=name).exists():
                text = _(
                    'Schedule "%(name)s" is not in JOBQUEUE["SCHEDULES"] any more, so there is '
                    "nothing to run: its row is what an earlier configuration left."
                )
            else:
                text = _('There is no schedule named "%(name)s".')
            self.message_user(request, text % {"name": name}, messages.ERROR)
            return
        spec = configured[name]
        job = schedule_state.run_now(spec, timezone.now(), using=using)
        if job is not None:
            self.message_user(
                request,
                format_html(
                    gettext('Schedule "{}": enqueued <a href="{}">job {}</a>, due now.'),
                    name,
                    reverse(f"{self.admin_site.name}:jobqueue_job_change", args=[job.pk]),
                    job.pk,
                ),
                messages.SUCCESS,
            )
            return
        self.message_user(
            request, refused_message(spec, using, self.admin_site.name), messages.WARNING
        )

    def _pause(self, request: HttpRequest, name: str, paused: bool, using: str) -> None:
        row = Schedule.objects.using(using).filter(name=name).first()
        was_paused = row is not None and row.paused
        if not schedule_state.set_paused(name, paused, using=using):
            self.message_user(
                request,
                _('There is no schedule named "%(name)s".') % {"name": name},
                messages.ERROR,
            )
            return
        if paused == was_paused:
            text = (
                _('Schedule "%(name)s" was already paused.')
                if paused
                else _('Schedule "%(name)s" was not paused.')
            )
        elif paused:
            text = _(
                'Paused schedule "%(name)s": its ticks pass without enqueuing, on every host, '
                "until you resume it."
            )
        else:
            text = _('Resumed schedule "%(name)s": it runs again from its next tick.')
        self.message_user(request, text % {"name": name}, messages.SUCCESS)


def refused_message(spec: ScheduleSpec, using: str, site: str) -> SafeString:
    """Why "run now" enqueued nothing: the schedule's previous run is unfinished."""
    unfinished = (
        Job.objects.using(using)
        .filter(idempotency_key=spec.idempotency_key, status__in=states.UNFINISHED)
        .values_list("pk", "status")
        .first()
    )
    rule = gettext(
        "A schedule has at most one unfinished run: wait for it to finish, or discard it."
    )
    if unfinished is None:
        # It finished between the refusal and this read: pressing again will run.
        return format_html(
            gettext('Schedule "{}" was not run: its previous run was unfinished. {}'),
            spec.name,
            rule,
        )
    pk, status = unfinished
    return format_html(
        gettext(
            'Schedule "{}" was not run: its previous run, <a href="{}">job {}</a>, is still {}. {}'
        ),
        spec.name,
        reverse(f"{site}:jobqueue_job_change", args=[pk]),
        pk,
        status,
        rule,
    )


class ChangeListNames:
    """What ``admin/change_list.html`` reads outside its content block, for a page that
    extends it without being a changelist: so the page gets Django's own breadcrumbs (an
    ``ol`` since Django 6, a ``div`` before) and stylesheet for its table."""

    formset = None

    def __init__(self, opts: Any) -> None:
        self.opts = opts
