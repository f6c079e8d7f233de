"""``jobqueue.notice.AbandonedJobsMiddleware``, the public path of the staff notice
(:mod:`jobqueue.console.notice`), as settings name it in ``MIDDLEWARE``."""

from jobqueue.console.notice import AbandonedJobsMiddleware

__all__ = ["AbandonedJobsMiddleware"]
