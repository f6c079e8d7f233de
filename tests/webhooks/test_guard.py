"""The SSRF guard's answers, address by address, and how check_url parses and resolves.

No database and no Django: the guard is the standard library only, and these tests run on
every interpreter the project supports (``ipaddress`` changed its answers between them, so
the guard writes its networks out; this table holds it to the same answers everywhere).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import pytest

from jobqueue.contrib.webhooks.guard import (
    CheckedTarget,
    Refused,
    check_url,
    embedded_ipv4,
    refusal,
)

REFUSED = [
    # address, the phrase refusal() gives
    ("0.0.0.0", "the unspecified address"),
    ("0.1.2.3", "a 'this network' address"),
    ("127.0.0.1", "a loopback address"),
    ("127.255.255.254", "a loopback address"),
    ("169.254.169.254", "a link-local address"),
    ("169.254.0.1", "a link-local address"),
    ("10.0.0.1", "a private address"),
    ("172.16.0.1", "a private address"),
    ("172.31.255.255", "a private address"),
    ("192.168.1.1", "a private address"),
    ("100.64.0.1", "a private address (shared address space)"),
    ("224.0.0.1", "a multicast address"),
    ("239.255.255.250", "a multicast address"),
    ("192.0.0.9", "a reserved address"),  # global in newer Pythons; refused here everywhere
    ("192.0.2.1", "a reserved address"),
    ("198.18.0.1", "a reserved address"),
    ("198.51.100.1", "a reserved address"),
    ("203.0.113.1", "a reserved address"),
    ("192.88.99.1", "a reserved address"),
    ("240.0.0.1", "a reserved address"),
    ("255.255.255.255", "a reserved address"),
    ("::", "the unspecified address"),
    ("::1", "a loopback address"),
    ("fe80::1", "a link-local address"),
    ("fe80::1%eth0", "a link-local address"),
    ("fc00::1", "a private address (unique local)"),
    ("fd12:3456::1", "a private address (unique local)"),
    ("fec0::1", "a private address (site-local)"),
    ("ff02::1", "a multicast address"),
    ("ff0e::1", "a multicast address"),
    ("64:ff9b:1::a00:1", "a private address (local-use NAT64)"),
    ("2002:7f00:1::", "a 6to4 address"),  # 6to4 wrapping 127.0.0.1
    ("2002:808:808::", "a 6to4 address"),  # even a public one: a tunnel, refused whole
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "a reserved address"),  # Teredo
    ("2001:db8::1", "a reserved address"),
    ("3fff::1", "a reserved address"),
    ("100::1", "a reserved address"),
    ("5f00::1", "a reserved address"),
    ("::7f00:1", "a reserved address"),  # the deprecated IPv4-compatible form of 127.0.0.1
    ("4000::1", "a reserved address"),  # outside 2000::/3, not allocated
    # IPv4-mapped and NAT64 forms carry the class of the IPv4 address inside.
    ("::ffff:127.0.0.1", "an IPv4-mapped form of 127.0.0.1, a loopback address"),
    ("::ffff:169.254.169.254", "an IPv4-mapped form of 169.254.169.254, a link-local address"),
    ("::ffff:10.0.0.1", "an IPv4-mapped form of 10.0.0.1, a private address"),
    ("::ffff:0.0.0.0", "an IPv4-mapped form of 0.0.0.0, the unspecified address"),
    ("64:ff9b::7f00:1", "a NAT64 form of 127.0.0.1, a loopback address"),
    ("64:ff9b::169.254.169.254", "a NAT64 form of 169.254.169.254, a link-local address"),
    ("64:ff9b::c0a8:101", "a NAT64 form of 192.168.1.1, a private address"),
]

PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.215.14",
    "172.32.0.1",  # just outside 172.16.0.0/12
    "100.128.0.1",  # just outside 100.64.0.0/10
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "::ffff:8.8.8.8",  # what an IPv6 socket uses to reach 8.8.8.8
    "64:ff9b::808:808",  # 8.8.8.8 through a NAT64 gateway
]


@pytest.mark.parametrize(("address", "why"), REFUSED)
def test_refusal_names_the_class(address: str, why: str) -> None:
    assert refusal(ipaddress.ip_address(address)) == why


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_not_refused(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


def test_embedded_ipv4_reads_the_mapped_and_nat64_forms() -> None:
    assert embedded_ipv4(ipaddress.IPv6Address("::ffff:10.1.2.3")) == ipaddress.IPv4Address(
        "10.1.2.3"
    )
    assert embedded_ipv4(ipaddress.IPv6Address("64:ff9b::a01:203")) == ipaddress.IPv4Address(
        "10.1.2.3"
    )
    assert embedded_ipv4(ipaddress.IPv6Address("2001:db8::a01:203")) is None


def test_allow_networks_allow_an_address_and_its_mapped_forms() -> None:
    allow = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8")]

    assert refusal(ipaddress.ip_address("10.0.0.5"), allow) is None
    assert refusal(ipaddress.ip_address("::ffff:10.0.0.5"), allow) is None
    assert refusal(ipaddress.ip_address("64:ff9b::a00:5"), allow) is None
    assert refusal(ipaddress.ip_address("fd00::5"), allow) is None
    # Only what the networks hold: the rest of the internal ranges stay refused.
    assert refusal(ipaddress.ip_address("11.0.0.5"), allow) is None  # public anyway
    assert refusal(ipaddress.ip_address("192.168.0.5"), allow) == "a private address"
    assert refusal(ipaddress.ip_address("127.0.0.1"), allow) == "a loopback address"
    assert refusal(ipaddress.ip_address("fc00::5"), allow) == "a private address (unique local)"


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, list[str]]], list[str]]:
    """Answer the given names with the given addresses; returns every name looked up.
    A name not given resolves as usual (numeric forms, /etc/hosts)."""
    lookups: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def install(answers: dict[str, list[str]]) -> list[str]:
        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            lookups.append(host)
            if host not in answers:
                return real_getaddrinfo(host, port, *args, **kwargs)
            if not answers[host]:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return [
                (
                    socket.AF_INET6 if ":" in address else socket.AF_INET,
                    socket.SOCK_STREAM,
                    socket.IPPROTO_TCP,
                    "",
                    (address, port),
                )
                for address in answers[host]
            ]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        return lookups

    return install


def test_check_url_takes_the_url_apart(dns: Callable[[dict[str, list[str]]], list[str]]) -> None:
    dns({"partner.example": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]})

    checked = check_url("HTTPS://user:p%40ss@Partner.Example:8443/hooks/in?a=1&b=2#frag")

    assert checked == CheckedTarget(
        scheme="https",
        host="partner.example",
        port=8443,
        address=ipaddress.IPv4Address("93.184.215.14"),
        target="/hooks/in?a=1&b=2",
        username="user",
        password="p%40ss",
        addresses=(
            ipaddress.IPv4Address("93.184.215.14"),
            ipaddress.IPv6Address("2606:2800:21f:cb07:6820:80da:af6b:8b2c"),
        ),
    )
    assert check_url("http://partner.example").port == 80
    assert check_url("http://partner.example").target == "/"
    assert check_url("https://partner.example").port == 443


def test_any_refused_address_refuses_the_name(
    dns: Callable[[dict[str, list[str]]], list[str]],
) -> None:
    dns({"webhook.example": ["93.184.215.14", "10.0.0.5"]})

    with pytest.raises(Refused) as refused:
        check_url("https://webhook.example/hook")

    assert str(refused.value) == (
        "refused: webhook.example resolves to 10.0.0.5, a private address"
    )


def test_an_ip_literal_is_checked_without_dns(
    dns: Callable[[dict[str, list[str]]], list[str]],
) -> None:
    lookups = dns({})

    assert check_url("http://93.184.215.14/").address == ipaddress.IPv4Address("93.184.215.14")
    assert check_url("http://[2606:4700::1111]:8080/").address == ipaddress.IPv6Address(
        "2606:4700::1111"
    )
    with pytest.raises(Refused, match=r"^refused: 169\.254\.169\.254 is a link-local address$"):
        check_url("http://169.254.169.254/latest/meta-data/")
    assert lookups == []


def test_the_first_address_is_the_one_to_connect_to(
    dns: Callable[[dict[str, list[str]]], list[str]],
) -> None:
    dns({"two.example": ["2606:4700::1111", "1.1.1.1", "2606:4700::1111"]})

    checked = check_url("http://two.example/")

    assert checked.address == ipaddress.IPv6Address("2606:4700::1111")
    assert checked.addresses == (checked.address, ipaddress.IPv4Address("1.1.1.1"))


def test_a_name_that_does_not_resolve_raises_oserror(
    dns: Callable[[dict[str, list[str]]], list[str]],
) -> None:
    # Not a refusal: DNS may answer on a later attempt.
    dns({"gone.example": []})

    with pytest.raises(socket.gaierror) as failed:
        check_url("http://gone.example/")

    assert failed.value.strerror == "cannot resolve gone.example: Name or service not known"


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",  # 127.0.0.1 as one decimal number
        "http://0x7f000001/",
        "http://127.1/",
        "http://0177.0.0.1/",
        "http://LOCALHOST/",
        "http://partner.example@127.0.0.1/",  # the host is after the @
        "http://partner.example\\@127.0.0.1/",
        "http://127.0.0.1#@partner.example/",
        "http://[::ffff:7f00:1]/",
    ],
)
def test_other_spellings_of_loopback_are_refused(url: str) -> None:
    with pytest.raises(Refused, match="loopback"):
        check_url(url)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://partner.example/", "the webhook URL has the scheme 'ftp'; only http and https"),
        ("file:///etc/passwd", "the webhook URL has the scheme 'file'"),
        ("partner.example/hooks", "the webhook URL has the scheme ''"),
        ("http:///hooks", "the webhook URL names no host"),
        ("http://:8080/hooks", "the webhook URL names no host"),
        ("http://partner.example:99999/", "the webhook URL is not valid (Port out of range"),
        ("http://partner.example:http/", "the webhook URL is not valid"),
        ("http://[::1/", "the webhook URL is not valid"),
        ("http://a..example/", "'a..example' is not a valid host name"),
    ],
)
def test_a_url_that_is_not_deliverable_is_refused(url: str, message: str) -> None:
    with pytest.raises(Refused) as refused:
        check_url(url)

    assert str(refused.value).startswith(f"refused: {message}")


@pytest.mark.parametrize(
    "url",
    [
        "ftp://user:hunter2@partner.example/T0/B0/sekrit?token=abc",
        "http://user:hunter2@partner.example:99999/T0/B0/sekrit?token=abc",
        "http://user:hunter2@10.0.0.1/T0/B0/sekrit?token=abc",
        "http://user:hunter2@localhost/T0/B0/sekrit?token=abc",
    ],
)
def test_a_refusal_never_repeats_the_path_query_or_credentials(url: str) -> None:
    # The reason is stored on the job, and a hook URL's path or query is often its secret.
    with pytest.raises(Refused) as refused:
        check_url(url)

    for secret in ("hunter2", "sekrit", "abc", "user"):
        assert secret not in str(refused.value)
