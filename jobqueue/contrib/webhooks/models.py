"""The webhooks a project delivers events to.

A delivery job stores a webhook's id, never its URL or secret: the worker reads the row when
it delivers, so an edit (a new secret, a new URL, switched off) applies to deliveries already
queued, and the secret never sits in the jobs table for as long as retention keeps a job.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models

from jobqueue.contrib.webhooks import signing

ALL_EVENTS = "*"


def validate_events(value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(e, str) and e for e in value):
        raise ValidationError(
            'Give a list of event names, such as ["order.paid"], or ["*"] for every event.'
        )


def validate_secret(value: str) -> None:
    if not value:
        return  # generated on save
    try:
        signing.secret_key(value)
    except ValueError as exc:
        raise ValidationError(f"Not a Standard Webhooks secret: {exc}.") from None


class Webhook(models.Model):
    url = models.URLField(
        "URL",
        max_length=2000,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="Where each event is POSTed. Internal addresses are refused when delivering "
        'unless JOBQUEUE["WEBHOOKS"]["ALLOW_NETWORKS"] holds them.',
    )
    events = models.JSONField(
        default=list,
        validators=[validate_events],
        help_text='The event names this webhook receives, such as ["order.paid"]; ["*"] for all.',
    )
    # A callable default, so that bulk_create gets one too; save() fills a blank one.
    secret = models.CharField(
        max_length=signing.SECRET_MAX_LENGTH,
        blank=True,
        default=signing.generate_secret,
        validators=[validate_secret],
        help_text="whsec_ and base64: the key receivers verify signatures with. Generated "
        "when left blank.",
    )
    active = models.BooleanField(
        default=True, help_text="Off: no new deliveries, and queued ones are discarded."
    )
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.description.splitlines()[0] if self.description else self.url

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.secret:
            self.secret = signing.generate_secret()
        super().save(*args, **kwargs)

    def subscribes_to(self, event: str) -> bool:
        return subscribed(self.events, event)

    @property
    def masked_secret(self) -> str:
        return signing.mask(self.secret)


def subscribed(events: Any, event: str) -> bool:
    """Whether an ``events`` list (as stored) takes ``event``."""
    return isinstance(events, list) and (ALL_EVENTS in events or event in events)
