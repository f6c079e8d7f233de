"""The SSRF guard: which addresses a webhook may be delivered to, decided before any connection.

A webhook URL is chosen by whoever registers the webhook, so without a guard the workers
would post to anything the URL names: the cloud metadata service at ``169.254.169.254``, the
database on ``localhost:5432``, a router's admin page. :func:`check_url` parses the URL,
resolves its host once, and refuses it if **any** address is not a public unicast address
(:func:`refusal` says why), unless ``allow_networks`` holds it. The transport then connects to
the address that was checked, never to the name again, so a DNS answer that changes between
the check and the connection (DNS rebinding) cannot move the delivery.

The classes are written out as network lists rather than read from ``ipaddress``'s
``is_private`` and ``is_global``, whose answers changed between Python 3.11, 3.12 and 3.13
(6to4, NAT64, the IETF protocol blocks): the same address must get the same answer on every
interpreter the project supports. This module uses the standard library only.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

SCHEMES = {"http": 80, "https": 443}


class Refused(Exception):
    """A delivery the guard will not make; ``str()`` is the sentence an operator reads."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class CheckedTarget:
    """Where a delivery goes: the URL's parts and the one address that was checked."""

    scheme: str
    host: str  # as the URL names it (IDNA-encoded, no brackets): the Host header and TLS name
    port: int
    address: Address  # the address to connect to; nothing resolves the host again
    target: str  # path and query, as given, for the request line
    username: str | None = None
    password: str | None = None
    # Every address the host resolved to, all checked, ``address`` first: the ones to try,
    # in order, when connecting to one fails.
    addresses: tuple[Address, ...] = ()


def _networks(*cidrs: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


# (networks, what they are), checked in order; the first match names the class. IPv4 from the
# IANA special-purpose registry: every block that is not globally reachable.
IPV4_CLASSES: tuple[tuple[tuple[Network, ...], str], ...] = (
    (_networks("0.0.0.0/32"), "the unspecified address"),
    # Linux connects 0.0.0.0 to the local host, and the rest of 0/8 is "this network".
    (_networks("0.0.0.0/8"), "a 'this network' address"),
    (_networks("127.0.0.0/8"), "a loopback address"),
    (_networks("169.254.0.0/16"), "a link-local address"),
    (_networks("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"), "a private address"),
    # Carrier-grade NAT space: not RFC 1918, but as internal (and VPNs such as Tailscale use it).
    (_networks("100.64.0.0/10"), "a private address (shared address space)"),
    (_networks("224.0.0.0/4"), "a multicast address"),
    (
        _networks(
            "192.0.0.0/24",  # IETF protocol assignments
            "192.0.2.0/24",  # documentation
            "192.88.99.0/24",  # the deprecated 6to4 relay anycast
            "198.18.0.0/15",  # benchmarking
            "198.51.100.0/24",  # documentation
            "203.0.113.0/24",  # documentation
            "240.0.0.0/4",  # reserved, and 255.255.255.255, the broadcast address
        ),
        "a reserved address",
    ),
)

IPV6_CLASSES: tuple[tuple[tuple[Network, ...], str], ...] = (
    (_networks("::/128"), "the unspecified address"),
    (_networks("::1/128"), "a loopback address"),
    (_networks("fe80::/10"), "a link-local address"),
    (_networks("fc00::/7"), "a private address (unique local)"),
    (_networks("fec0::/10"), "a private address (site-local)"),
    (_networks("ff00::/8"), "a multicast address"),
    # Local-use NAT64 translates to whatever the operator's network routes: internal.
    (_networks("64:ff9b:1::/48"), "a private address (local-use NAT64)"),
    # Tunnels whose far end is an IPv4 address of the sender's choosing (6to4, Teredo in
    # 2001::/32), deprecated and with no place in a webhook URL: refused whole.
    (_networks("2002::/16"), "a 6to4 address"),
    (
        _networks(
            "100::/64",  # discard-only
            "2001::/23",  # IETF protocol assignments, Teredo among them
            "2001:db8::/32",  # documentation
            "3fff::/20",  # documentation
            "5f00::/16",  # segment routing identifiers
        ),
        "a reserved address",
    ),
)

# Only 2000::/3 is allocated for global unicast; anything else left is reserved.
IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
# NAT64's well-known prefix carries an IPv4 address in its last 32 bits: it is as safe as that.
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for: IPv4-mapped (``::ffff:a.b.c.d``) or NAT64."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def allowed(address: Address, allow_networks: Sequence[Network]) -> bool:
    # A network of the other IP version never contains the address (no TypeError).
    return any(address in network for network in allow_networks)


def refusal(address: Address, allow_networks: Sequence[Network] = ()) -> str | None:
    """Why ``address`` is refused, as a phrase ("a private address"), or None if it is not."""
    if allowed(address, allow_networks):
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            # A zone ("fe80::1%eth0") only means something for a link-local address; check the
            # address without it so that no zone changes the answer.
            address = ipaddress.IPv6Address(address.compressed.split("%")[0])
        inner = embedded_ipv4(address)
        if inner is not None:
            why = refusal(inner, allow_networks)
            if why is None:
                return None
            form = "an IPv4-mapped" if address.ipv4_mapped is not None else "a NAT64"
            return f"{form} form of {inner}, {why}"
        classes = IPV6_CLASSES
    else:
        classes = IPV4_CLASSES
    for networks, why in classes:
        if any(address in network for network in networks):
            return why
    if isinstance(address, ipaddress.IPv6Address) and address not in IPV6_GLOBAL_UNICAST:
        return "a reserved address"
    # The lists above cover every block the standard library knows today; this catches one a
    # later Python adds.
    if not address.is_global:
        return "not a globally reachable address"
    return None


def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to for TCP, in the resolver's order, without repeats.

    Raises OSError (``socket.gaierror``) when the name does not resolve: a network failure
    that a later attempt may not meet, unlike a refusal.
    """
    answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    addresses: list[Address] = []
    for _family, _type, _proto, _canonname, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]))
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise socket.gaierror(socket.EAI_NONAME, f"{host} resolves to no address")
    return addresses


def check_url(url: str, allow_networks: Sequence[Network] = ()) -> CheckedTarget:
    """Parse ``url``, resolve its host once and check every address; raise Refused if any fails.

    A host given as an IP literal is checked as it is, without DNS. The first address the
    resolver gives is the one to connect to; the others, checked too, are there to fall back on.
    """
    # The messages name the host at most, never the URL: a path or query often carries a
    # token (chat services' hook URLs are secrets), and the message is stored on the job.
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"refused: the webhook URL is not valid ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise Refused(
            f"refused: the webhook URL has the scheme {parts.scheme!r}; "
            "only http and https are delivered"
        )
    hostname = parts.hostname
    if not hostname:
        raise Refused("refused: the webhook URL names no host")
    if port is None:
        port = SCHEMES[scheme]
    try:
        literal: Address | None = ipaddress.ip_address(hostname)
    except ValueError:
        literal = None
    if literal is not None:
        why = refusal(literal, allow_networks)
        if why is not None:
            raise Refused(f"refused: {hostname} is {why}")
        host, addresses = hostname, [literal]
    else:
        try:
            host = hostname.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise Refused(f"refused: {hostname!r} is not a valid host name ({exc})") from None
        try:
            addresses = resolve(host, port)
        except socket.gaierror as exc:
            raise socket.gaierror(exc.errno, f"cannot resolve {host}: {exc.strerror}") from exc
        for address in addresses:
            why = refusal(address, allow_networks)
            if why is not None:
                raise Refused(f"refused: {host} resolves to {address}, {why}")
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    return CheckedTarget(
        scheme=scheme,
        host=host,
        port=port,
        address=addresses[0],
        target=target,
        username=parts.username,
        password=parts.password,
        addresses=tuple(addresses),
    )
