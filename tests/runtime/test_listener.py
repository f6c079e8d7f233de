"""The LISTEN thread: it hears a committed enqueue, and stop() ends it at once."""

import logging
import threading
import time

import pytest
from django.db import DEFAULT_DB_ALIAS

from jobqueue.runtime.listener import POOLER_WARNING, SAFETY_TIMEOUT, Listener, connection_target
from jobqueue.store.channel import NOTIFY_CHANNEL
from tests.conftest import wait_for
from tests.testapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("postgresql_only")]


@pytest.fixture
def listener():
    heard: list[str] = []
    connected = threading.Event()
    listener = Listener(
        target=connection_target(DEFAULT_DB_ALIAS, None),
        channel=NOTIFY_CHANNEL,
        on_notify=heard.append,
        on_connect=connected.set,
    )
    listener.heard = heard
    listener.start()
    assert connected.wait(10), "the listener never connected"
    yield listener
    listener.stop()


def test_a_committed_enqueue_is_heard(listener):
    tasks.add.using(queue="emails").enqueue(1, 2)
    wait_for(lambda: "emails" in listener.heard, timeout=5, message="the notification")


def test_stop_wakes_the_thread_instead_of_waiting_out_its_timeout(listener):
    thread = listener._thread
    # Let the thread settle into its wait on the connection.
    time.sleep(0.2)
    started = time.monotonic()
    listener.stop()
    assert not thread.is_alive()
    # Without the wake-up the thread would sit in select() for up to SAFETY_TIMEOUT.
    assert time.monotonic() - started < SAFETY_TIMEOUT / 2


def test_through_pgbouncer_it_says_so_and_never_reports_itself_connected(pgbouncer_url, caplog):
    connected = threading.Event()
    listener = Listener(
        target=(pgbouncer_url, {}),
        channel=NOTIFY_CHANNEL,
        on_notify=lambda queue: None,
        on_connect=connected.set,
    )
    with caplog.at_level(logging.WARNING, logger="jobqueue.worker"):
        listener.start()
        # It gives up: every reconnection would find the same pooler.
        wait_for(lambda: not listener._thread.is_alive(), timeout=10, message="it to give up")
    listener.stop()
    assert POOLER_WARNING in caplog.messages
    # So the worker polls, and has no "caught up after reconnecting" look either.
    assert not listener.connected.is_set()
    assert not connected.is_set()
