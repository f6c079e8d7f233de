"""Schedules: the entries of ``JOBQUEUE["SCHEDULES"]`` (``spec``) and their shared state in
the database (``state``). A worker evaluates them with :mod:`jobqueue.runtime.ticker`."""
