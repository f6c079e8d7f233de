"""``manage.py demo``'s settings: the example project's, with a lease short enough to watch a
recovery, a pool of its own for the worker processes it kills, and the logs in a file.

The demo command re-executes itself with these (and ``DATABASE_URL`` pointing at a fresh
database), and its worker processes inherit them: ``JOBQUEUE_DEMO_DIR`` is the directory of
that run, where the log goes.
"""

from pathlib import Path

from testproject.settings import *  # noqa: F403
from testproject.settings import BASE_DIR, env

DEMO_DIR = Path(env.str("JOBQUEUE_DEMO_DIR", default=str(BASE_DIR)))
DEMO_LOG = DEMO_DIR / "demo.log"

JOBQUEUE = {
    # A killed worker's job is recovered once its lease runs out: three seconds here, five
    # minutes by default. The heartbeat renews it every second.
    "LEASE": 3,
    "SAFETY_BUFFER": 0.5,
    "POLL_INTERVAL": 0.1,
    # The worker processes still running at the end have nothing left to finish.
    "SHUTDOWN_TIMEOUT": 2,
    "POOLS": {
        # The demo's own process runs this pool, so that it hears every signal.
        "default": {"queues": "*", "concurrency": 4},
        # Separate ``runjobs --pool killable`` processes, which the demo kills mid-job.
        "killable": {"queues": ["media", "payments"], "concurrency": 1},
    },
}

# Every process of the demo appends to one file: its own output is the stories alone.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}
    },
    "handlers": {
        "file": {"class": "logging.FileHandler", "filename": DEMO_LOG, "formatter": "plain"}
    },
    "loggers": {"jobqueue": {"handlers": ["file"], "level": "INFO"}},
}
