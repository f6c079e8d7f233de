"""Pause and Resume on the admin's Queues page: POST with CSRF, for those who may change jobs."""

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from jobqueue.models import QueuePause
from tests.admin.conftest import client_for, staff
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

PAGE = "/admin/jobqueue/queuesummary/"
ACT = PAGE + "pause/"


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_an_operator_pauses_and_resumes_a_queue_from_its_row(operator):
    JobFactory(queue="emails")
    html = operator.get(PAGE).content.decode()
    assert f'action="{ACT}"' in html and 'name="queue" value="emails"' in html
    assert 'value="pause"' in html and 'value="resume"' not in html

    response = operator.post(ACT, {"queue": "emails", "action": "pause"}, follow=True)
    assert response.redirect_chain == [(PAGE, 302)]
    assert messages_of(response) == [
        'Paused queue "emails": its jobs are still enqueued, but no worker claims them, on '
        "any host, until you resume it."
    ]
    assert QueuePause.objects.get().paused_by == "operator"
    [row] = response.context["rows"]
    assert row["paused"] is True
    html = response.content.decode()
    assert "<strong>paused</strong>" in html and 'value="resume"' in html

    again = operator.post(ACT, {"queue": "emails", "action": "pause"}, follow=True)
    assert messages_of(again) == ['Queue "emails" was already paused.']

    resumed = operator.post(ACT, {"queue": "emails", "action": "resume"}, follow=True)
    assert messages_of(resumed) == ['Resumed queue "emails": its workers claim its due jobs now.']
    assert not QueuePause.objects.exists()


def test_a_paused_queue_with_no_jobs_is_listed_with_its_resume_button(operator):
    QueuePause.objects.create(queue="quiet", paused_by="ada")
    response = operator.get(PAGE)
    [row] = response.context["rows"]
    assert (row["queue"], row["paused"]) == ("quiet", True)
    assert 'value="resume"' in response.content.decode()


def test_without_change_job_there_is_no_button_and_a_post_is_refused(viewer):
    JobFactory(queue="emails")
    html = viewer.get(PAGE).content.decode()
    assert "jobqueue-pause-state" in html and 'value="pause"' not in html
    assert viewer.post(ACT, {"queue": "emails", "action": "pause"}).status_code == 403
    assert not QueuePause.objects.exists()


def test_only_a_post_with_a_csrf_token_pauses(db):
    user = staff("guarded", "jobqueue.view_job", "jobqueue.change_job")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get(ACT).status_code == 405
    assert client.post(ACT, {"queue": "emails", "action": "pause"}).status_code == 403
    assert not QueuePause.objects.exists()
    assert client_for(user).get(ACT).status_code == 405


def test_an_unknown_action_or_a_bad_name_is_said_not_done(operator):
    response = operator.post(ACT, {"queue": "emails", "action": "stop"}, follow=True)
    assert messages_of(response) == ["Unknown action 'stop'."]
    response = operator.post(ACT, {"queue": "", "action": "pause"}, follow=True)
    assert messages_of(response) == ["not a queue name: '' (1 to 100 characters)"]
    assert not QueuePause.objects.exists()
