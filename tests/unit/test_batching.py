"""Group commit: concurrent writes share a statement; a lone write goes out at once."""

import threading
import time

import pytest

from jobqueue.batching import GroupCommit


def test_a_lone_write_goes_out_at_once_and_alone():
    batches = []
    group = GroupCommit(lambda items: batches.append(list(items)) or set(items), key=lambda i: i)
    assert group.submit(1) is True
    assert batches == [[1]]


def test_writes_arriving_during_a_write_go_out_together():
    batches = []
    first_started = threading.Event()
    release_first = threading.Event()

    def write(items):
        batches.append(list(items))
        if len(batches) == 1:
            first_started.set()
            release_first.wait(5)
        return {i for i in items if i != 4}  # the fence refuses item 4

    group = GroupCommit(write, key=lambda i: i)
    results = {}

    def submit(i):
        results[i] = group.submit(i)

    threads = [threading.Thread(target=submit, args=(1,))]
    threads[0].start()
    first_started.wait(5)
    for i in (2, 3, 4):
        t = threading.Thread(target=submit, args=(i,))
        t.start()
        threads.append(t)
    time.sleep(0.1)  # let them queue behind the first write
    release_first.set()
    for t in threads:
        t.join(5)
    assert batches[0] == [1]
    assert sorted(batches[1]) == [2, 3, 4] and len(batches) == 2
    assert results == {1: True, 2: True, 3: True, 4: False}


def test_a_failed_write_raises_in_every_waiting_thread():
    def write(items):
        raise RuntimeError("database is away")

    group = GroupCommit(write, key=lambda i: i)
    with pytest.raises(RuntimeError, match="database is away"):
        group.submit(1)
    with pytest.raises(RuntimeError):  # and the next write is tried afresh
        group.submit(2)


def test_a_write_waits_for_the_slots_still_running_then_goes_out_with_them():
    batches = []
    group = GroupCommit(
        lambda items: batches.append(sorted(items)) or set(items), key=lambda i: i, linger=30
    )
    group.expected = lambda: 3  # three slots are running jobs
    threads = [threading.Thread(target=group.submit, args=(i,)) for i in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # Written as soon as the third arrived, long before the linger ran out.
    assert not any(t.is_alive() for t in threads)
    assert batches == [[1, 2, 3]]


def test_a_write_waits_no_longer_than_the_linger():
    batches = []
    group = GroupCommit(
        lambda items: batches.append(list(items)) or set(items), key=lambda i: i, linger=0.05
    )
    group.expected = lambda: 2  # the other slot's job fails, say: its success never comes
    started = time.monotonic()
    assert group.submit(1) is True
    assert batches == [[1]]
    assert time.monotonic() - started >= 0.05
