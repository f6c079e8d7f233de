"""Example tasks: found by every worker because this is an installed app's tasks.py."""

import os
import time

from jobqueue import task


@task(queue="emails")
def send_order_confirmation(order_id: int) -> dict:
    """Succeeds at once."""
    return {"order": order_id, "sent": True}


@task(takes_context=True, max_attempts=5, backoff=(0.5, 2, 5))
def call_payment_webhook(ctx, order_id: int) -> str:
    """Fails twice (the provider is "down"), then succeeds on the third attempt."""
    if ctx.attempt < 3:
        raise ConnectionError(f"payment provider unreachable (attempt {ctx.attempt})")
    return f"order {order_id} confirmed on attempt {ctx.attempt}"


@task(max_attempts=3, backoff=(0.5, 2, 5))
def import_broken_feed(url: str) -> None:
    """Always fails: ends failed, with one error per attempt."""
    raise ValueError(f"feed at {url} is not valid XML")


@task(queue="feeds", timeout=60)
def rebuild_feed(shop_id: int, seconds: float = 2.0) -> dict:
    """Slow: takes a couple of seconds."""
    time.sleep(seconds)
    return {"shop": shop_id, "rows": 1234}


@task(queue="emails", max_attempts=5)
def send_welcome_email(email: str) -> int:
    """Enqueued by the signup view; sends one email."""
    from django.core.mail import send_mail

    return send_mail("Welcome!", "Thanks for signing up.", None, [email])


# The demo kills the worker during a job's first run, so the first run lasts; any later run
# (recovered, or retried by an operator) finds the crash's entry in the job's errors.
FIRST_RUN_SECONDS = 60


@task(queue="media", takes_context=True)
def resize_photos(ctx, album_id: int) -> str:
    """Slow on its first run; returns which process finished it."""
    if not ctx.job.errors:
        time.sleep(FIRST_RUN_SECONDS)
    return f"album {album_id}: 12 photos resized by pid {os.getpid()}"


@task(queue="payments", takes_context=True, on_crash="park")
def charge_card(ctx, order_id: int) -> str:
    """Must never run twice behind an operator's back: a crash parks it (on_crash="park")."""
    if not ctx.job.errors:
        time.sleep(FIRST_RUN_SECONDS)
    return f"order {order_id} charged once, by pid {os.getpid()}"
