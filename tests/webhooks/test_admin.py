"""The webhooks' admin: the secret shown once then masked, recent deliveries listed."""

from __future__ import annotations

import re

import pytest

from jobqueue.contrib.webhooks import send_event
from jobqueue.contrib.webhooks.models import Webhook
from jobqueue.models import Job
from jobqueue.testing import run_jobs
from tests.webhooks.receiver import Answer

pytestmark = pytest.mark.django_db

ADD = "/admin/jobqueue_webhooks/webhook/add/"


def page(hook: Webhook) -> str:
    return f"/admin/jobqueue_webhooks/webhook/{hook.pk}/change/"


def test_a_new_webhooks_secret_is_shown_once_then_masked(admin_client):
    response = admin_client.post(
        ADD,
        {"url": "https://partner.example/hooks", "events": '["order.paid"]', "active": "on"},
    )
    hook = Webhook.objects.get()
    assert response.status_code == 302 and response["Location"] == page(hook)
    assert hook.secret.startswith("whsec_") and hook.events == ["order.paid"]

    first = admin_client.get(page(hook)).content.decode()
    again = admin_client.get(page(hook)).content.decode()

    assert hook.secret in first and "shown this once" in first
    assert hook.secret not in again
    assert hook.masked_secret in again


def test_the_add_form_does_not_send_a_generated_secret_to_the_browser(admin_client):
    form = admin_client.get(ADD).content.decode()
    assert "whsec_" not in form.replace("whsec_ and base64", "")


def test_a_secret_given_on_the_add_form_is_kept(admin_client):
    secret = Webhook(url="https://x.example").secret  # a well-formed one
    admin_client.post(
        ADD, {"url": "https://partner.example/hooks", "events": '["*"]', "secret": secret}
    )
    assert Webhook.objects.get().secret == secret


def test_editing_does_not_touch_or_show_the_secret(admin_client):
    hook = Webhook.objects.create(url="https://partner.example/hooks", events=["*"])
    content = admin_client.get(page(hook)).content.decode()
    assert hook.secret not in content and 'name="secret"' not in content

    response = admin_client.post(
        page(hook),
        {"url": "https://partner.example/v2", "events": '["order.paid"]', "description": "v2"},
    )

    assert response.status_code == 302
    edited = Webhook.objects.get(pk=hook.pk)
    assert (edited.url, edited.events, edited.active) == (
        "https://partner.example/v2",
        ["order.paid"],
        False,
    )
    assert edited.secret == hook.secret


def test_regenerating_the_secret_shows_the_new_one_once(admin_client):
    hook = Webhook.objects.create(url="https://partner.example/hooks", events=["*"])
    assert "jobqueue-webhook-regenerate" in admin_client.get(page(hook)).content.decode()
    regenerate = f"/admin/jobqueue_webhooks/webhook/{hook.pk}/regenerate-secret/"
    assert admin_client.get(regenerate).status_code == 405

    response = admin_client.post(regenerate)

    assert response.status_code == 302 and response["Location"] == page(hook)
    new = Webhook.objects.get(pk=hook.pk).secret
    assert new != hook.secret and new.startswith("whsec_")
    shown = admin_client.get(page(hook)).content.decode()
    assert new in shown and "A new secret was generated" in shown
    assert new not in admin_client.get(page(hook)).content.decode()


def test_only_users_who_may_change_webhooks_regenerate(client, django_user_model):
    from django.contrib.auth.models import Permission

    hook = Webhook.objects.create(url="https://partner.example/hooks", events=["*"])
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_webhook"))
    client.force_login(viewer)

    assert "jobqueue-webhook-regenerate" not in client.get(page(hook)).content.decode()
    response = client.post(f"/admin/jobqueue_webhooks/webhook/{hook.pk}/regenerate-secret/")

    assert response.status_code == 403
    assert Webhook.objects.get(pk=hook.pk).secret == hook.secret


def test_the_page_lists_recent_deliveries_with_their_last_response(
    admin_client, receiver, allow_loopback
):
    hook = Webhook.objects.create(url=receiver.url(), events=["order.paid", "order.refunded"])
    other = Webhook.objects.create(url=receiver.url(), events=["order.shipped"])
    # One delivery retried once, then delivered; one rejected; one to the other webhook.
    receiver.answers.append(Answer(500))
    send_event("order.paid", {"order": 1})
    run_jobs()
    receiver.answers.append(Answer(404, body=b"gone"))
    send_event("order.refunded", {"order": 2})
    send_event("order.shipped", {"order": 3})
    run_jobs()
    mine = Job.objects.filter(kwargs__webhook_id=hook.pk).order_by("id")
    assert [(job.status, job.attempts) for job in mine] == [("succeeded", 2), ("failed", 1)]

    content = admin_client.get(page(hook)).content.decode()

    table = content[content.index("jobqueue-webhook-deliveries") :]
    links = re.findall(r'href="/admin/jobqueue/job/(\d+)/change/"', table)
    assert links == [str(job.pk) for job in reversed(mine)]  # newest first
    assert not set(links) & {str(job.pk) for job in Job.objects.filter(kwargs__webhook_id=other.pk)}
    assert "order.paid" in table and "order.refunded" in table
    assert re.search(r"200 in \d+\.\d+ s", table)
    assert re.search(r"404 in \d+\.\d+ s", table)
    assert "DeliveryRejected: HTTP 404" in table and "2 / 8" in table and "1 / 8" in table
    assert "succeeded" in table and "failed" in table


def test_a_webhook_without_deliveries_says_so(admin_client):
    hook = Webhook.objects.create(url="https://partner.example/hooks", events=["*"])
    assert "No deliveries yet." in admin_client.get(page(hook)).content.decode()


def test_the_list_masks_every_secret(admin_client):
    hooks = [Webhook.objects.create(url="https://partner.example/hooks") for _ in range(2)]
    content = admin_client.get("/admin/jobqueue_webhooks/webhook/").content.decode()
    for hook in hooks:
        assert hook.secret not in content and hook.masked_secret in content
