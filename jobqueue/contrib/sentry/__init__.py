"""Report jobs' failed attempts to Sentry, with the job's context (needs ``sentry-sdk``).

Add ``"jobqueue.contrib.sentry"`` to ``INSTALLED_APPS`` and call ``sentry_sdk.init(...)`` as
usual; see ``docs/error-reporting.md``. :mod:`jobqueue.contrib.sentry.report` does the work.
"""
