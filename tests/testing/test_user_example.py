"""The example of docs/testing.md: a user's test of a view that enqueues a welcome email."""

import pytest
from shop.tasks import send_welcome_email

from jobqueue.models import Job


@pytest.mark.django_db
def test_signup_enqueues_one_welcome_email_and_it_sends(
    client, jobqueue_enqueued, jobqueue_run, mailoutbox
):
    client.post("/signup/", {"email": "ada@example.com"})

    jobqueue_enqueued.assert_enqueued(send_welcome_email, "ada@example.com", count=1)
    jobqueue_run()
    assert mailoutbox[0].to == ["ada@example.com"]


def test_the_same_without_writing_rows(client, jobqueue_captured, db):
    client.post("/signup/", {"email": "ada@example.com"})

    jobqueue_captured.assert_enqueued(send_welcome_email, email="ada@example.com", count=1)
    jobqueue_captured.assert_not_enqueued(send_welcome_email, "grace@example.com")
    assert not Job.objects.exists()
