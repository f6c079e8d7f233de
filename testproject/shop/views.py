"""A tiny signup view: the example that docs/testing.md tests with jobqueue.testing."""

from django.db import transaction
from django.http import HttpRequest, HttpResponse

from shop.tasks import send_welcome_email


def signup(request: HttpRequest) -> HttpResponse:
    email = request.POST["email"]
    with transaction.atomic():
        # ... create the account here: the email is enqueued only if the account commits.
        send_welcome_email.enqueue(email)
    return HttpResponse(status=201)
