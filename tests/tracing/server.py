"""What a web framework's instrumentation does for the tests: one SERVER span per request,
continuing a ``traceparent`` header when the request has one, and a view that enqueues."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from opentelemetry import propagate, trace

from tests.testapp import tasks


class ServerSpanMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.tracer = trace.get_tracer("tests.tracing.server")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        upstream = propagate.extract(request.headers)
        with self.tracer.start_as_current_span(
            f"{request.method} {request.path}", context=upstream, kind=trace.SpanKind.SERVER
        ):
            return self.get_response(request)


def signup(request: HttpRequest) -> JsonResponse:
    """Enqueue one job, or ``?many=N`` jobs with one enqueue_many()."""
    many = int(request.GET.get("many", 0))
    if many:
        jobs = tasks.add.using(queue="emails").enqueue_many([(n, n) for n in range(many)])
        return JsonResponse({"jobs": [job.id for job in jobs if job is not None]})
    job = tasks.add.using(queue="emails").enqueue(2, 3)
    return JsonResponse({"jobs": [job.id]})


urlpatterns = [path("signup/", signup)]
