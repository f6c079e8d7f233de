"""JOBQUEUE["METRICS_PORT"], its system check and the --metrics-port flag."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from jobqueue import checks, conf, metrics


def test_the_port_is_none_by_default_and_a_port_number_when_set():
    assert conf.build({}).metrics_port is None
    assert conf.build({"METRICS_PORT": 9310}).metrics_port == 9310


@pytest.mark.parametrize("bad", [0, 65536, -1, "9310", 9310.0, True])
def test_a_port_that_is_no_port_is_refused_naming_the_key(bad):
    with pytest.raises(ImproperlyConfigured, match=r'JOBQUEUE\["METRICS_PORT"\] must be a TCP'):
        conf.build({"METRICS_PORT": bad})


def test_a_bad_port_is_a_system_check_error(settings):
    settings.JOBQUEUE = {"METRICS_PORT": 70000}
    [error] = checks.check_settings()
    assert error.id == "jobqueue.E001" and "METRICS_PORT" in error.msg
    assert checks.check_metrics() == []  # said once


def test_a_port_without_prometheus_client_is_e006(settings, monkeypatch):
    settings.JOBQUEUE = {"METRICS_PORT": 9310}
    assert checks.check_metrics() == []
    monkeypatch.setattr(metrics, "available", lambda: False)
    [error] = checks.check_metrics()
    assert error.id == "jobqueue.E006"
    assert "prometheus-client" in error.msg and "django-jobqueue[metrics]" in error.hint


@pytest.mark.parametrize("bad", ["0", "65536", "http"])
def test_the_flag_takes_only_a_port(bad):
    with pytest.raises(CommandError, match="--metrics-port"):
        call_command("runjobs", "--metrics-port", bad)
