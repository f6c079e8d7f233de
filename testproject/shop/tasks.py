"""Example tasks: found by every worker because this is an installed app's tasks.py."""

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
