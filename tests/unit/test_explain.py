"""A recovery's words, rendered from the fields of its WorkerLost entry."""

from jobqueue.store import explain

REASON = "The worker stopped renewing its lease (killed, out of memory, or lost)."


def crash_entry(**fields):
    entry = {
        "type": "WorkerLost",
        "message": "",
        "traceback": "",
        "attempt": 1,
        "at": "2026-11-29T18:14:50.000001+00:00",
        "worker": "web1:8388:807ed1",
        "reason": REASON,
        "host": "web1",
        "pid": 8388,
        "last_heartbeat": "2026-11-29T18:14:45.999999+00:00",
        "lease_until": "2026-11-29T18:14:48.5+00:00",
        "policy": "retry",
        "crashes": 1,
        "max_crashes": 3,
        "outcome": "pending",
    }
    return {**entry, **fields}


def test_a_crash_returned_to_pending_reads_as_the_log_line():
    assert explain.crash(crash_entry()) == (
        f"{REASON} Worker web1:8388:807ed1 (host web1, pid 8388, last heartbeat "
        "2026-11-29 18:14:45 UTC), lease held until 2026-11-29 18:14:48 UTC. Returned to "
        "pending without spending an attempt (crash 1 of at most 3)."
    )


def test_a_parked_crash_names_its_policy_or_the_crash_limit():
    parked = explain.crash(crash_entry(policy="park", outcome="abandoned"))
    assert parked.endswith(
        'UTC. Parked as abandoned (on_crash="park"): retry or discard it by hand.'
    )
    limit = explain.crash(crash_entry(crashes=3, outcome="abandoned"))
    assert limit.endswith(
        "UTC. Parked as abandoned after 3 crashes (MAX_CRASHES): retry or discard it by hand."
    )


def test_a_worker_without_its_row_is_no_longer_registered():
    text = explain.crash(crash_entry(host=None, pid=None, last_heartbeat=None))
    assert "Worker web1:8388:807ed1 (no longer registered), lease held until" in text


def test_times_are_shown_in_utc_whatever_offset_they_were_stored_with():
    text = explain.crash(crash_entry(lease_until="2026-11-29T19:14:48+01:00"))
    assert "lease held until 2026-11-29 18:14:48 UTC" in text


def test_the_message_of_an_entry():
    # A crash with its fields is rendered from them, not from what its message says.
    assert explain.message(crash_entry(message="stale")) == explain.crash(crash_entry())
    # One written before the fields were stored, and any handler's, say their message.
    assert explain.message({"type": "WorkerLost", "message": "lost"}) == "lost"
    assert explain.message({"type": "ValueError", "message": "bad row"}) == "bad row"
    assert explain.message({"type": "ValueError"}) == ""
