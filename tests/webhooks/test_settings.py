"""JOBQUEUE["WEBHOOKS"]: defaults, and a bad value named at start-up."""

from __future__ import annotations

import importlib.util
import ipaddress

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobqueue import conf


def test_defaults():
    webhooks = conf.build({}).webhooks
    assert (webhooks.timeout, webhooks.allow_networks) == (10, ())


def test_networks_are_parsed():
    webhooks = conf.build(
        {"WEBHOOKS": {"TIMEOUT": 2.5, "ALLOW_NETWORKS": ["10.1.0.0/16", "fd00::/8", "127.0.0.1"]}}
    ).webhooks
    assert webhooks.timeout == 2.5
    assert webhooks.allow_networks == (
        ipaddress.ip_network("10.1.0.0/16"),
        ipaddress.ip_network("fd00::/8"),
        ipaddress.ip_network("127.0.0.1/32"),
    )


def test_one_key_given_keeps_the_default_of_the_other():
    assert conf.build({"WEBHOOKS": {"TIMEOUT": 3}}).webhooks.allow_networks == ()
    assert conf.build({"WEBHOOKS": {"ALLOW_NETWORKS": []}}).webhooks.timeout == 10


@pytest.mark.parametrize(
    ("webhooks", "message"),
    [
        (None, 'JOBQUEUE["WEBHOOKS"] must be a dict'),
        ({"TIMEOUTS": 5}, 'JOBQUEUE["WEBHOOKS"] has an unknown option "TIMEOUTS"'),
        ({"TIMEOUTS": 5}, 'Did you mean "TIMEOUT"?'),
        ({"TIMEOUT": 0}, 'JOBQUEUE["WEBHOOKS"]["TIMEOUT"] must be more than zero seconds'),
        ({"TIMEOUT": "10"}, 'JOBQUEUE["WEBHOOKS"]["TIMEOUT"] must be a number of seconds'),
        ({"ALLOW_NETWORKS": "10.0.0.0/8"}, 'JOBQUEUE["WEBHOOKS"]["ALLOW_NETWORKS"] must be a list'),
        (
            {"ALLOW_NETWORKS": ["10.0.0.1/8"]},
            "has '10.0.0.1/8', which is not a network in CIDR notation",
        ),
        ({"ALLOW_NETWORKS": ["10.0.0.1/8"]}, "has host bits set"),
        ({"ALLOW_NETWORKS": ["internal"]}, "has 'internal', which is not a network"),
        ({"ALLOW_NETWORKS": [10]}, "has 10, which is not a network"),
    ],
)
def test_bad_values_name_the_key(webhooks, message):
    with pytest.raises(ImproperlyConfigured) as excinfo:
        conf.build({"WEBHOOKS": webhooks})
    assert message in str(excinfo.value)


def test_the_system_check_reports_them_at_start_up(settings):
    from jobqueue.checks import check_settings

    settings.JOBQUEUE = {"WEBHOOKS": {"ALLOW_NETWORKS": ["10.0.0.0/33"]}}
    [error] = check_settings()
    assert error.id == "jobqueue.E001"
    assert 'JOBQUEUE["WEBHOOKS"]["ALLOW_NETWORKS"] has \'10.0.0.0/33\'' in error.msg


def test_the_app_needs_httpx(monkeypatch):
    from jobqueue.contrib.webhooks.checks import check_httpx

    assert check_httpx() == []
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "httpx" else real(name, *a)
    )
    [error] = check_httpx()
    assert error.id == "jobqueue_webhooks.E001"
    assert "django-jobqueue[webhooks]" in error.hint
