"""The Webhook model: generated Standard Webhooks secrets, validation, subscriptions."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
import standardwebhooks
from django.core.exceptions import ValidationError

from jobqueue.contrib.webhooks import signing
from jobqueue.contrib.webhooks.models import Webhook

pytestmark = pytest.mark.django_db

URL = "https://partner.example/hooks"


def test_a_blank_secret_is_generated_in_the_standard_webhooks_form():
    hook = Webhook.objects.create(url=URL, events=["order.paid"])
    other = Webhook.objects.create(url=URL, events=["order.paid"], secret="")
    for secret in (hook.secret, other.secret):
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
        standardwebhooks.Webhook(secret)  # the library takes it
    assert hook.secret != other.secret
    assert Webhook.objects.get(pk=hook.pk).secret == hook.secret


def test_bulk_created_webhooks_get_secrets_too():
    Webhook.objects.bulk_create(Webhook(url=URL, events=["*"]) for _ in range(3))
    secrets = set(Webhook.objects.values_list("secret", flat=True))
    assert len(secrets) == 3 and all(s.startswith("whsec_") for s in secrets)


def test_a_secret_from_another_system_is_kept():
    secret = "whsec_" + base64.b64encode(b"k" * 24).decode()
    assert Webhook.objects.create(url=URL, events=["*"], secret=secret).secret == secret


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("hunter2", 'starts with "whsec_"'),
        ("whsec_not base64!", "base64"),
        ("whsec_" + base64.b64encode(b"short").decode(), "24 to 64 bytes, not 5"),
    ],
)
def test_a_malformed_secret_is_refused_by_validation(secret, message):
    hook = Webhook(url=URL, events=["*"], secret=secret)
    with pytest.raises(ValidationError) as excinfo:
        hook.full_clean()
    assert message in str(excinfo.value.message_dict["secret"])


@pytest.mark.parametrize("events", ["order.paid", [""], [1], {"order.paid": True}])
def test_events_must_be_a_list_of_names(events):
    with pytest.raises(ValidationError) as excinfo:
        Webhook(url=URL, events=events).full_clean()
    assert "events" in excinfo.value.message_dict


@pytest.mark.parametrize("url", ["ftp://partner.example/x", "file:///etc/passwd", "partner"])
def test_only_http_and_https_urls_validate(url):
    with pytest.raises(ValidationError) as excinfo:
        Webhook(url=url, events=["*"]).full_clean()
    assert "url" in excinfo.value.message_dict


def test_subscriptions():
    assert Webhook(events=["order.paid"]).subscribes_to("order.paid")
    assert not Webhook(events=["order.paid"]).subscribes_to("order.refunded")
    assert Webhook(events=["*"]).subscribes_to("anything")
    assert not Webhook(events=[]).subscribes_to("order.paid")


def test_the_mask_shows_only_the_end():
    hook = Webhook(url=URL, events=["*"])
    assert hook.masked_secret == f"whsec_…{hook.secret.rstrip('=')[-4:]}"
    assert hook.secret.removeprefix("whsec_")[:-6] not in hook.masked_secret


def test_signing_matches_the_library_for_any_body():
    secret = signing.generate_secret()
    body = '{"type":"a","data":"é ü 😀"}'.encode()
    signature = signing.sign(secret, "msg_1", 1700000000, body)
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": "1700000000",
        "webhook-signature": signature,
    }
    at = dt.datetime.fromtimestamp(1700000000, tz=dt.UTC)
    expected = standardwebhooks.Webhook(secret).sign("msg_1", at, body.decode())
    assert signature == expected
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError, match="timestamp"):
        # Verified for real only near its time; here the library says it is too old.
        standardwebhooks.Webhook(secret).verify(body, headers)
