"""One webhook request over httpx, to the address the SSRF guard checked and nowhere else.

:func:`post` asks :mod:`jobqueue.contrib.webhooks.guard` for the target, then sends the
request to the checked IP address: the URL handed to httpx names the address, not the host,
so nothing resolves the host a second time (DNS rebinding cannot move the connection). The
host goes in the ``Host`` header and, for https, in the ``sni_hostname`` request extension,
which httpcore uses as the TLS server name, so the certificate is verified against the host
the webhook names. No redirect is followed, no proxy or certificate setting is taken from the
environment (an ``HTTPS_PROXY`` would route around the guard), no cookies are kept, and the
response body is read up to ``max_body`` bytes and no further.
"""

from __future__ import annotations

import base64
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

import jobqueue
from jobqueue.contrib.webhooks.guard import Address, CheckedTarget, Network, Refused, check_url

__all__ = ["Refused", "Response", "post"]

USER_AGENT = f"jobqueue-webhooks/{jobqueue.__version__}"
PRINTABLE_ASCII = "".join(chr(code) for code in range(0x21, 0x7F))


@dataclass(frozen=True)
class Response:
    """What the receiver answered: ``body`` is at most ``max_body`` bytes, the rest unread."""

    status: int
    headers: httpx.Headers
    body: bytes
    elapsed: float  # seconds, from the check to the last byte read


@cache
def ssl_context() -> ssl.SSLContext:
    """httpx's default context (certifi's CAs, hostnames checked), made once per process:
    loading the CA bundle costs milliseconds of CPU, too much to spend on every delivery."""
    return httpx.create_ssl_context(trust_env=False)


def post(
    url: str,
    *,
    body: bytes,
    headers: Mapping[str, str],
    timeout: float,
    allow_networks: Sequence[Network] = (),
    max_body: int = 4096,
) -> Response:
    """POST ``body`` to ``url`` if the guard allows it; raise Refused if not, or on a redirect.

    ``timeout`` is for the whole exchange: connecting and each read and write get what is
    left of it, and once it has passed, reading the body stops with ``httpx.ReadTimeout``, so
    a receiver that trickles its body cannot hold the worker. (Resolving the name is bounded
    by the resolver's own timeouts, and a receiver that trickles its headers by the per-read
    timeout and in the end by the task's timeout.) Network failures raise
    ``httpx.TransportError`` subclasses; a name that does not resolve ``httpx.ConnectError``.
    """
    started = time.monotonic()
    deadline = started + timeout
    try:
        checked = check_url(url, allow_networks)
    except OSError as exc:
        # The name did not resolve: a network failure, which a later attempt may not meet.
        raise httpx.ConnectError(exc.strerror or str(exc)) from exc
    request_headers = httpx.Headers(headers)
    request_headers.setdefault("User-Agent", USER_AGENT)
    # The body is stored for the operator, capped: a compressed one could expand far past
    # the cap in one chunk, so ask for none and read the raw bytes.
    request_headers["Accept-Encoding"] = "identity"
    request_headers["Host"] = host_header(checked)
    if checked.username is not None:
        request_headers.setdefault("Authorization", basic_auth(checked))
    with httpx.Client(
        verify=ssl_context(),
        follow_redirects=False,
        trust_env=False,
    ) as client:
        response = send(client, checked, body, request_headers, deadline)
        try:
            if 300 <= response.status_code < 400:
                location = response.headers.get("Location")
                to = f"a redirect to {shown(location)}" if location else "a redirect"
                raise Refused(
                    f"refused: the receiver at {checked.host} answered {response.status_code} "
                    f"({to}), and redirects are not followed"
                )
            content = read_capped(response, max_body, deadline)
        finally:
            response.close()
    return Response(
        status=response.status_code,
        headers=response.headers,
        body=content,
        elapsed=time.monotonic() - started,
    )


def send(
    client: httpx.Client,
    checked: CheckedTarget,
    body: bytes,
    headers: httpx.Headers,
    deadline: float,
) -> httpx.Response:
    """Send the request to the checked addresses in turn until one connects; the response
    is streamed (its body not read yet).

    Only a failure to connect moves on to the next address: once connected, the request
    may have arrived, and sending it again is the retry's business, not this loop's.
    """
    extensions = {"sni_hostname": checked.host} if checked.scheme == "https" else {}
    addresses = checked.addresses or (checked.address,)
    for address in addresses:
        # Each try gets what is left of the timeout, so the last one cannot overrun it.
        remaining = max(deadline - time.monotonic(), 0.001)
        request = client.build_request(
            "POST",
            pinned_url(checked, address),
            content=body,
            headers=headers,
            extensions=extensions,
            timeout=httpx.Timeout(remaining),
        )
        try:
            return client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            if address == addresses[-1] or time.monotonic() >= deadline:
                raise
    raise AssertionError("unreachable: the last address raises or returns")


def pinned_url(checked: CheckedTarget, address: Address) -> httpx.URL:
    """The request URL with the checked ``address`` in place of the host."""
    return httpx.URL(
        scheme=checked.scheme,
        host=str(address),
        port=checked.port,
        # A path with characters beyond printable ASCII is sent percent-encoded, as httpx
        # would; what is already percent-encoded stays as it is.
        raw_path=quote(checked.target, safe=PRINTABLE_ASCII).encode("ascii"),
    )


def host_header(checked: CheckedTarget) -> str:
    host = f"[{checked.host}]" if ":" in checked.host else checked.host
    default = 443 if checked.scheme == "https" else 80
    return host if checked.port == default else f"{host}:{checked.port}"


def basic_auth(checked: CheckedTarget) -> str:
    # Credentials in the URL (https://user:pass@host/) are what httpx would send as Basic
    # auth; the pinned URL has no userinfo, so they are sent explicitly.
    pair = f"{unquote(checked.username or '')}:{unquote(checked.password or '')}"
    return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


def shown(location: str) -> str:
    """A redirect's target as an error message shows it: no credentials, no query, short."""
    parts = urlsplit(location)
    netloc = parts.netloc.rpartition("@")[2]
    text = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return text if len(text) <= 200 else text[:199] + "…"


def read_capped(response: httpx.Response, max_body: int, deadline: float) -> bytes:
    """Up to ``max_body`` bytes of the body; the rest is never read (closing drops it)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size >= max_body:
            break
        if time.monotonic() > deadline:
            # Each read has its own timeout; this bounds a receiver that trickles bytes.
            raise httpx.ReadTimeout(
                "the response took longer than the timeout", request=response.request
            )
    return b"".join(chunks)[:max_body]
