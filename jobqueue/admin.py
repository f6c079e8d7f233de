"""Where Django's admin autodiscovery looks: importing the console's admin registers
jobqueue's pages (:mod:`jobqueue.console.admin`)."""

from jobqueue.console import admin  # noqa: F401
