"""The Django view of the database-derived gauges, for a project to mount and protect:

    path("metrics/jobs", staff_member_required(jobqueue.metrics.views.metrics))

Each request builds its own registry around a :class:`DatabaseCollector`, so nothing is
registered globally and two requests never meet.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from jobqueue.metrics.gauges import DatabaseCollector


@require_GET
def metrics(request: HttpRequest, using: str = "default") -> HttpResponse:
    """The gauges in Prometheus's text format (or OpenMetrics, if the scraper asks)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(using))
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(registry), content_type=content_type)
