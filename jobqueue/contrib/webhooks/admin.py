"""The webhooks in the admin: editable, the secret shown once, recent deliveries listed.

A secret is shown in full only on the page that follows its creation (or its regeneration),
from the session, where it is removed as it is shown; after that it is masked. Deliveries
are jobs: their Retry and Discard buttons are jobqueue's own, on each job's page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from jobqueue.console import display
from jobqueue.contrib.webhooks import deliveries, signing
from jobqueue.contrib.webhooks.models import Webhook

SESSION_KEY = "jobqueue_webhooks:new_secret"


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ("id", "url", "events", "active", "masked_secret", "updated_at")
    list_display_links = ("id", "url")
    list_filter = ("active",)
    search_fields = ("url", "description")
    readonly_fields = ("masked_secret", "created_at", "updated_at", "recent_deliveries")

    def get_fields(self, request: HttpRequest, obj: Webhook | None = None) -> Any:
        if obj is None:
            # Blank: generated on save. A secret may be given, for a receiver moved here
            # from another system.
            return ["url", "events", "active", "description", "secret"]
        return [
            "url",
            "events",
            "active",
            "description",
            "masked_secret",
            ("created_at", "updated_at"),
            "recent_deliveries",
        ]

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        # Not the model's default: a secret generated into the form would travel to the
        # browser and back before it is even saved.
        return {**super().get_changeform_initial_data(request), "secret": ""}

    @admin.display(description=gettext_lazy("secret"))
    def masked_secret(self, webhook: Webhook) -> str:
        return webhook.masked_secret

    @admin.display(description=gettext_lazy("recent deliveries"))
    def recent_deliveries(self, webhook: Webhook) -> SafeString:
        rows = deliveries.recent(webhook.pk)
        if not rows:
            return format_html("<p>{}</p>", _("No deliveries yet."))
        site = self.admin_site.name
        header = format_html_join(
            "",
            "<th>{}</th>",
            (
                (_(label),)
                for label in (
                    "job",
                    "event",
                    "status",
                    "attempts",
                    "last response",
                    "last error",
                    "enqueued",
                    "finished",
                )
            ),
        )
        body = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
            "<td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    reverse(f"{site}:jobqueue_job_change", args=[d.job.pk]),
                    d.job.pk,
                    d.event,
                    display.status_badge(d.job.status),
                    f"{d.job.attempts} / {d.job.max_attempts}",
                    d.response or display.EMPTY,
                    display.first_line(d.job.last_error) or display.EMPTY,
                    display.moment(d.job.enqueued_at),
                    display.moment(d.job.finished_at),
                )
                for d in rows
            ),
        )
        return format_html(
            '<table class="jobqueue-webhook-deliveries"><thead><tr>{}</tr></thead>'
            "<tbody>{}</tbody></table><p>{}</p>",
            header,
            body,
            _("Retry and Discard are on each job's page."),
        )

    # -- the secret, shown once ---------------------------------------------------------

    def response_add(
        self, request: HttpRequest, obj: Webhook, post_url_continue: str | None = None
    ) -> HttpResponse:
        self._show_once(request, obj)
        # To the webhook's page, where the secret is shown, whichever button was pressed.
        return HttpResponseRedirect(self._change_url(obj))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        if request.method == "GET":
            shown = request.session.get(SESSION_KEY)
            if isinstance(shown, dict) and str(shown.get("id")) == str(object_id):
                # Removed as it is shown: reloading the page shows the masked form only.
                del request.session[SESSION_KEY]
                context["jobqueue_webhook_secret"] = shown.get("secret")
        webhook = self.get_object(request, object_id)
        if webhook is not None and self.has_change_permission(request, webhook):
            context["jobqueue_regenerate_url"] = reverse(
                f"{self.admin_site.name}:jobqueue_webhooks_webhook_regenerate", args=[webhook.pk]
            )
        return super().change_view(request, object_id, form_url, context)

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<int:object_id>/regenerate-secret/",
                self.admin_site.admin_view(require_POST(self.regenerate_view)),
                name="jobqueue_webhooks_webhook_regenerate",
            ),
            *super().get_urls(),
        ]

    def regenerate_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """A new secret; deliveries from now on, queued ones included, are signed with it."""
        webhook = get_object_or_404(self.get_queryset(request), pk=object_id)
        if not self.has_change_permission(request, webhook):
            raise PermissionDenied
        webhook.secret = signing.generate_secret()
        webhook.save(update_fields=["secret", "updated_at"])
        self.log_change(request, webhook, [{"changed": {"fields": ["secret"]}}])
        self._show_once(request, webhook)
        messages.warning(
            request,
            _(
                "A new secret was generated. Every delivery from now on is signed with it, "
                "those already queued included: give it to the receiver."
            ),
        )
        return HttpResponseRedirect(self._change_url(webhook))

    def _show_once(self, request: HttpRequest, webhook: Webhook) -> None:
        request.session[SESSION_KEY] = {"id": webhook.pk, "secret": webhook.secret}

    def _change_url(self, webhook: Webhook) -> str:
        return reverse(
            f"{self.admin_site.name}:jobqueue_webhooks_webhook_change", args=[webhook.pk]
        )
