"""System check: the webhooks app is installed, so its workers need httpx."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.core import checks


@checks.register()
def check_httpx(**kwargs: Any) -> list[checks.CheckMessage]:
    if importlib.util.find_spec("httpx") is not None:
        return []
    return [
        checks.Error(
            "jobqueue.contrib.webhooks is installed but httpx is not: no delivery could be "
            "sent, and every one would fail.",
            hint='Install the extra: pip install "django-jobqueue[webhooks]".',
            id="jobqueue_webhooks.E001",
        )
    ]
