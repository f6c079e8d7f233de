"""Secrets, delivery ids and signatures in the Standard Webhooks form. No database here.

A secret is ``whsec_`` and the base64 of random bytes; the signature of one request is
``v1,`` and the base64 HMAC-SHA256, keyed with those bytes, of ``"{id}.{timestamp}.{body}"``.
That is what the ``standardwebhooks`` and ``svix`` libraries verify, so a receiver needs
nothing of ours. Written with hmac and base64 here: the library is only the tests' judge.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
# What a secret given by hand (one moved from another system) may hold: the specification
# asks for 24 to 64 random bytes.
SECRET_BYTES_RANGE = (24, 64)
DELIVERY_PREFIX = "msg_"
SECRET_MAX_LENGTH = len(SECRET_PREFIX) + 4 * ((SECRET_BYTES_RANGE[1] + 2) // 3)


def generate_secret() -> str:
    """A new ``whsec_<base64>`` secret of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key a secret stands for; ``ValueError`` saying why if it is not one."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise ValueError(f'a webhook secret starts with "{SECRET_PREFIX}"')
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f'a webhook secret is "{SECRET_PREFIX}" and base64 text') from None
    low, high = SECRET_BYTES_RANGE
    if not low <= len(key) <= high:
        raise ValueError(f"a webhook secret holds {low} to {high} bytes, not {len(key)}")
    return key


def sign(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header of one request."""
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def delivery_id() -> str:
    """A new delivery's id, ``msg_`` and 24 random hex digits: its ``webhook-id`` header."""
    return DELIVERY_PREFIX + secrets.token_hex(12)


def mask(secret: str) -> str:
    """What the admin shows of a secret once it has been shown: ``whsec_…abcd``."""
    if not secret:
        return ""
    return f"{SECRET_PREFIX}…{secret.rstrip('=')[-4:]}"
