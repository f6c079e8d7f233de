"""Settings of the chaos soak (``python bench/soak.py``) and of the workers it supervises.

The bench settings plus the soak's app, and the soak's JOBQUEUE values, which ``soak.py``
passes to every process in ``JOBQUEUE_SOAK_SETTINGS`` (JSON), as it passes ``DATABASE_URL``.
"""

import json
import os

from bench.settings import *  # noqa: F403
from bench.settings import INSTALLED_APPS, JOBQUEUE

INSTALLED_APPS = [*INSTALLED_APPS, "bench.soakapp"]
JOBQUEUE = {**JOBQUEUE, **json.loads(os.environ.get("JOBQUEUE_SOAK_SETTINGS", "{}"))}

# The supervisor's lines (deaths, restarts, recoveries) and the workers' warnings, with the
# pid that wrote them; per-job INFO lines would only load the two cores.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "jobqueue": {"handlers": ["console"], "level": "WARNING"},
        "jobqueue.supervisor": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
