"""transport.post against a real HTTP server on loopback: what it sends, and what it never does.

A refused address must see no packet: where the receiver listens on the refused address, its
count of accepted connections stays 0; elsewhere, no socket connect is attempted at all
(``socket.socket.connect`` is counted, not replaced).
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from jobqueue.contrib.webhooks import transport
from jobqueue.contrib.webhooks.transport import Refused, Response, post
from tests.webhooks.receiver import Answer, Receiver, running_receiver

LOOPBACK = [ipaddress.ip_network("127.0.0.0/8")]


def deliver(url: str, **kwargs: Any) -> Response:
    options: dict[str, Any] = {
        "body": b'{"type": "order.paid"}',
        "headers": {"Content-Type": "application/json", "webhook-id": "msg_1"},
        "timeout": 5.0,
    }
    options.update(kwargs)
    return post(url, **options)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket in this process tries to connect to, from now on."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        attempts.append(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return attempts


def test_an_allowed_post_arrives_with_its_headers_body_and_host(receiver: Receiver) -> None:
    response = deliver(receiver.url("/hook?x=1"), allow_networks=LOOPBACK)

    assert response.status == 200
    assert response.body == b"ok"
    assert response.headers["content-length"] == "2"
    assert 0 < response.elapsed < 5
    [request] = receiver.requests
    assert request.method == "POST"
    assert request.path == "/hook?x=1"
    assert request.body == b'{"type": "order.paid"}'
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-id"] == "msg_1"
    assert request.headers["host"] == f"127.0.0.1:{receiver.port}"
    assert request.headers["user-agent"] == transport.USER_AGENT
    assert "cookie" not in request.headers


def test_the_host_header_is_the_name_in_the_url_not_the_address(receiver: Receiver) -> None:
    response = deliver(
        receiver.url(host="localhost"), allow_networks=[*LOOPBACK, ipaddress.ip_network("::1/128")]
    )

    assert response.status == 200
    assert receiver.requests[0].headers["host"] == f"localhost:{receiver.port}"


def test_without_allow_networks_the_local_receiver_sees_nothing(
    receiver: Receiver, connects: list[Any]
) -> None:
    for host in ("127.0.0.1", "::ffff:127.0.0.1", "localhost"):
        with pytest.raises(Refused, match="loopback"):
            deliver(receiver.url(host=host))

    assert receiver.connections == 0
    assert connects == []


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("::1", "::1 is a loopback address"),
        ("10.0.0.1", "10.0.0.1 is a private address"),
        ("169.254.169.254", "169.254.169.254 is a link-local address"),
        ("::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1, a loopback address"),
        ("::ffff:169.254.169.254", "IPv4-mapped form of 169.254.169.254, a link-local"),
        ("64:ff9b::a00:1", "NAT64 form of 10.0.0.1, a private address"),
        ("0.0.0.0", "the unspecified address"),
        ("fd00::1", "a private address"),
        ("224.0.0.1", "a multicast address"),
    ],
)
def test_a_refused_address_is_never_connected_to(host: str, why: str, connects: list[Any]) -> None:
    with pytest.raises(Refused, match=why):
        deliver(f"http://[{host}]:8080/" if ":" in host else f"http://{host}:8080/")

    assert connects == []


def test_a_name_that_resolves_to_loopback_names_the_address(connects: list[Any]) -> None:
    with pytest.raises(Refused) as refused:
        deliver("http://localhost:8080/hook")

    assert str(refused.value).startswith("refused: localhost resolves to ")
    assert "a loopback address" in str(refused.value)
    assert connects == []


def test_only_http_and_https_are_delivered(connects: list[Any]) -> None:
    for url in ("ftp://example.com/", "file:///etc/passwd", "gopher://example.com/"):
        with pytest.raises(Refused, match="only http and https"):
            deliver(url)
    with pytest.raises(Refused, match="names no host"):
        deliver("http:///hook")
    assert connects == []


def test_a_redirect_is_refused_and_never_followed(receiver: Receiver) -> None:
    receiver.answers.append(Answer(302, {"Location": receiver.url("/elsewhere")}))

    with pytest.raises(Refused) as refused:
        deliver(receiver.url("/hook"), allow_networks=LOOPBACK)

    assert str(refused.value) == (
        f"refused: the receiver at 127.0.0.1 answered 302 (a redirect to "
        f"{receiver.url('/elsewhere')}), and redirects are not followed"
    )
    assert [request.path for request in receiver.requests] == ["/hook"]


def test_a_redirect_message_shows_no_credentials_or_query(receiver: Receiver) -> None:
    location = "https://user:hunter2@elsewhere.example/in?token=abc"
    receiver.answers.append(Answer(307, {"Location": location}))

    with pytest.raises(Refused) as refused:
        deliver(receiver.url(), allow_networks=LOOPBACK)

    assert "answered 307 (a redirect to https://elsewhere.example/in)" in str(refused.value)


def test_the_body_is_read_up_to_max_body(receiver: Receiver) -> None:
    receiver.answers.append(Answer(200, body=b"x" * 1_000_000))

    response = deliver(receiver.url(), allow_networks=LOOPBACK, max_body=100)

    assert response.body == b"x" * 100


def test_a_receiver_that_never_answers_times_out(receiver: Receiver) -> None:
    receiver.answers.append(Answer(hang=True))
    started = time.monotonic()

    with pytest.raises(httpx.TimeoutException):
        deliver(receiver.url(), allow_networks=LOOPBACK, timeout=0.3)

    assert time.monotonic() - started < 2


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, list[str]]], list[str]]:
    """Make each given name resolve to its answers in turn, one per lookup (the last one
    thereafter), an answer being addresses joined by commas; returns every name looked up.
    Other names resolve as usual."""
    lookups: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def install(answers: dict[str, list[str]]) -> list[str]:
        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            lookups.append(host)
            if host not in answers:
                return real_getaddrinfo(host, port, *args, **kwargs)
            queue = answers[host]
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            return [
                (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))
                for address in answer.split(",")
            ]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        return lookups

    return install


@pytest.fixture
def twin(receiver: Receiver) -> Iterator[Receiver]:
    """A second receiver on 127.0.0.2 and the same port as ``receiver`` (on 127.0.0.1)."""
    yield from running_receiver("127.0.0.2", receiver.port)


def test_dns_rebinding_cannot_move_the_connection(
    receiver: Receiver,
    twin: Receiver,
    dns: Callable[[dict[str, list[str]]], list[str]],
    connects: list[Any],
) -> None:
    # The name answers 127.0.0.2 (the one address allowed) when checked, and 127.0.0.1 on
    # any later lookup: the delivery must reach 127.0.0.2, and 127.0.0.1 must see nothing.
    lookups = dns({"rebind.test": ["127.0.0.2", "127.0.0.1"]})

    response = deliver(
        f"http://rebind.test:{receiver.port}/hook",
        allow_networks=[ipaddress.ip_network("127.0.0.2/32")],
    )

    assert response.status == 200
    assert lookups.count("rebind.test") == 1
    assert [address[0] for address in connects] == ["127.0.0.2"]
    assert twin.requests[0].headers["host"] == f"rebind.test:{receiver.port}"
    assert receiver.connections == 0


def test_when_an_address_refuses_the_connection_the_next_checked_one_is_tried(
    receiver: Receiver,
    dns: Callable[[dict[str, list[str]]], list[str]],
    connects: list[Any],
) -> None:
    # Nothing listens on 127.0.0.3: connecting is refused at once, and the delivery goes to
    # the second address of the same answer, without asking DNS again.
    lookups = dns({"two.test": ["127.0.0.3,127.0.0.1", "127.0.0.4"]})

    response = deliver(f"http://two.test:{receiver.port}/", allow_networks=LOOPBACK)

    assert response.status == 200
    assert [address[0] for address in connects] == ["127.0.0.3", "127.0.0.1"]
    assert lookups.count("two.test") == 1
    assert len(receiver.requests) == 1


def test_every_address_is_checked_before_any_is_tried(
    receiver: Receiver,
    dns: Callable[[dict[str, list[str]]], list[str]],
    connects: list[Any],
) -> None:
    dns({"mixed.test": ["127.0.0.1,10.0.0.1"]})

    with pytest.raises(Refused, match="mixed.test resolves to 10.0.0.1, a private address"):
        deliver(f"http://mixed.test:{receiver.port}/", allow_networks=LOOPBACK)

    assert connects == []
    assert receiver.connections == 0


def test_a_receiver_that_trickles_its_body_is_cut_off_at_the_timeout(receiver: Receiver) -> None:
    # Every byte comes well within the per-read timeout; the whole would take 10 s.
    receiver.answers.append(Answer(200, body=b"x" * 200, trickle=0.05))
    started = time.monotonic()

    with pytest.raises(httpx.ReadTimeout):
        deliver(receiver.url(), allow_networks=LOOPBACK, timeout=0.5)

    assert time.monotonic() - started < 1.5


def test_a_name_that_does_not_resolve_is_a_network_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_such_name(host: Any, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)

    with pytest.raises(httpx.ConnectError, match="^cannot resolve gone.test: Name or service"):
        deliver("http://gone.test/secret-path")


def test_proxy_settings_in_the_environment_are_ignored(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy would make the connection to a host the guard never checked.
    proxy = Receiver().start()
    try:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url("/"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)

        response = deliver(receiver.url(), allow_networks=LOOPBACK)
    finally:
        proxy.stop()

    assert response.status == 200
    assert len(receiver.requests) == 1
    assert proxy.connections == 0


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for receiver.test (not for 127.0.0.1): (cert, key) paths."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = str(directory / "cert.pem"), str(directory / "key.pem")
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=receiver.test"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-addext", "subjectAltName=DNS:receiver.test", "-keyout", key, "-out", cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_receiver(
    certificate: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Receiver]:
    """An https receiver on 127.0.0.1 with the certificate, which the client then trusts."""
    cert, key = certificate
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=cert)
    monkeypatch.setattr(transport, "ssl_context", lambda: client)
    yield from running_receiver(tls=server)


def test_https_goes_to_the_checked_address_and_verifies_the_host_name(
    tls_receiver: Receiver, dns: Callable[[dict[str, list[str]]], list[str]]
) -> None:
    dns({"receiver.test": ["127.0.0.1"]})

    response = deliver(tls_receiver.url(host="receiver.test"), allow_networks=LOOPBACK)

    # The certificate names receiver.test, not 127.0.0.1, the address connected to: the
    # handshake passed on the host name, which went out as the TLS server name.
    assert response.status == 200
    assert tls_receiver.server_names == ["receiver.test"]
    assert tls_receiver.requests[0].headers["host"] == f"receiver.test:{tls_receiver.port}"


def test_https_refuses_a_certificate_for_another_name(
    tls_receiver: Receiver, dns: Callable[[dict[str, list[str]]], list[str]]
) -> None:
    dns({"impostor.test": ["127.0.0.1"]})

    with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
        deliver(tls_receiver.url(host="impostor.test"), allow_networks=LOOPBACK)

    assert tls_receiver.server_names == ["impostor.test"]
    assert tls_receiver.requests == []
