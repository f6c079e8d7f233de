"""The Django view of the database-derived gauges, read through the test client and parsed
with prometheus_client's own parser."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import FinishedJobFactory, JobFactory, WorkerFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]


def scrape(client, url="/metrics/jobs") -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_jobs_per_queue_and_state_oldest_due_and_live_workers(client, settings):
    now = timezone.now()
    JobFactory.create_batch(3, queue="emails", run_at=now - dt.timedelta(seconds=120))
    JobFactory(queue="emails", run_at=now + dt.timedelta(hours=1))
    JobFactory(queue="reports", status="running", worker="w")
    JobFactory(queue="reports", status="failed")
    JobFactory(queue="reports", status="abandoned")
    FinishedJobFactory.create_batch(5, queue="emails")  # succeeded rows are not counted
    WorkerFactory.create_batch(2, pool="default")
    WorkerFactory(pool="default", heartbeat_age=settings.JOBQUEUE.get("LEASE", 300) + 60)

    samples = scrape(client)

    def jobs(queue: str, state: str) -> float:
        return samples[("jobqueue_queue_jobs", (("queue", queue), ("state", state)))]

    assert [jobs("emails", s) for s in ("due", "scheduled", "running", "failed", "abandoned")] == [
        3,
        1,
        0,
        0,
        0,
    ]
    assert [jobs("reports", s) for s in ("due", "scheduled", "running", "failed", "abandoned")] == [
        0,
        0,
        1,
        1,
        1,
    ]
    oldest = samples[("jobqueue_queue_oldest_due_seconds", (("queue", "emails"),))]
    assert 120 <= oldest < 180
    assert samples[("jobqueue_queue_oldest_due_seconds", (("queue", "reports"),))] == 0
    # The worker whose heartbeat is older than LEASE is not live.
    assert samples[("jobqueue_workers", (("pool", "default"),))] == 2


def test_an_empty_table_still_names_the_configured_pools(client):
    samples = scrape(client)
    assert samples[("jobqueue_workers", (("pool", "default"),))] == 0


def test_two_requests_do_not_collide_in_a_registry(client):
    JobFactory(queue="emails")
    first, second = scrape(client), scrape(client)
    assert {k: v for k, v in first.items() if k[0] != "jobqueue_queue_oldest_due_seconds"} == {
        k: v for k, v in second.items() if k[0] != "jobqueue_queue_oldest_due_seconds"
    }
    assert first[("jobqueue_queue_jobs", (("queue", "emails"), ("state", "due")))] == 1


def test_wrapped_in_staff_member_required_it_sends_others_to_log_in(client, admin_user):
    assert client.get("/protected/metrics/jobs").status_code == 302
    client.force_login(admin_user)
    assert ("jobqueue_workers", (("pool", "default"),)) in scrape(client, "/protected/metrics/jobs")


def test_only_get(client):
    assert client.post("/metrics/jobs").status_code == 405


def test_past_the_cap_a_count_is_estimated_on_postgresql_and_counted_on_sqlite(
    client, monkeypatch, vendor
):
    from django.db import connection

    from jobqueue.metrics import gauges

    monkeypatch.setattr(gauges, "CAP", 3)
    now = timezone.now()
    JobFactory.create_batch(40, queue="emails", run_at=now - dt.timedelta(seconds=5))
    JobFactory(queue="emails", run_at=now + dt.timedelta(hours=1))
    if vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE jobqueue_job")
    samples = scrape(client)
    due = samples[("jobqueue_queue_jobs", (("queue", "emails"), ("state", "due")))]
    # Below the cap: exact.
    assert samples[("jobqueue_queue_jobs", (("queue", "emails"), ("state", "scheduled")))] == 1
    if vendor == "sqlite":
        assert due == 40
    else:  # the planner's estimate from fresh statistics: near, and never below the cap
        assert 20 <= due <= 80
