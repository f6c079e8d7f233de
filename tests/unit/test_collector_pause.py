"""The pause of the cyclic garbage collector around a bulk enqueue."""

import gc
import threading

import pytest

from jobqueue.tasks.enqueue import _CollectorPause


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_overlapping_pauses_restore_the_collector_when_the_last_ends(collector_enabled):
    pause = _CollectorPause()
    first_in, second_done, first_may_end = (threading.Event() for _ in range(3))
    seen = {}

    def first():
        with pause():
            first_in.set()
            first_may_end.wait(10)
        seen["after first"] = gc.isenabled()

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(10)
    with pause():
        assert not gc.isenabled()
    # The first pause has not ended: the collector stays paused for it.
    seen["after second"] = gc.isenabled()
    second_done.set()
    first_may_end.set()
    thread.join(10)
    assert seen == {"after second": False, "after first": True}


def test_a_collector_disabled_before_stays_disabled(collector_enabled):
    pause = _CollectorPause()
    gc.disable()
    with pause():
        pass
    assert not gc.isenabled()


def test_an_error_inside_still_restores_the_collector(collector_enabled):
    pause = _CollectorPause()
    with pytest.raises(ValueError), pause():
        raise ValueError("inside")
    assert gc.isenabled()
