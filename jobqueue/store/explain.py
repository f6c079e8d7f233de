"""The words of a crash recovery, rendered from the facts its error entry stores.

When a job's worker is lost, the ``recover`` statement (``jobqueue/sql``) applies the crash
policy and appends a ``WorkerLost`` entry to the job's ``errors`` holding the facts as
fields: why the worker is thought lost, which worker it was and what its row said of it,
the lease it held, the policy, the crash count and what became of the job. This module
turns those fields into the operator's sentence, once, for every place that shows it: the
job's ``last_error`` and the entry's ``message`` (written by the store in the same
transaction), the log line, the admin's job page and Django's ``TaskResult.errors``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from jobqueue import states
from jobqueue.store.errors import WORKER_LOST


def message(entry: Mapping[str, Any]) -> str:
    """What an error entry says: a crash's sentence rendered from its fields, or, for any
    other entry (and a crash entry written before its fields were stored), its message."""
    if is_crash(entry) and "outcome" in entry:
        return crash(entry)
    return str(entry.get("message") or "")


def is_crash(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") == WORKER_LOST


def crash(entry: Mapping[str, Any]) -> str:
    """The sentence of one recovery: the reason, the worker, the lease, what became of the
    job. For example: "The worker stopped renewing its lease (killed, out of memory, or
    lost). Worker web1:8388:807ed1 (host web1, pid 8388, last heartbeat 2026-11-29 18:14:45
    UTC), lease held until 2026-11-29 18:14:48 UTC. Returned to pending without spending an
    attempt (crash 1 of at most 3)."
    """
    host, pid, heartbeat = entry.get("host"), entry.get("pid"), entry.get("last_heartbeat")
    if host is None or pid is None or heartbeat is None:
        # Its worker row is gone: reaped a lease after its last heartbeat, or never written.
        registered = "no longer registered"
    else:
        registered = f"host {host}, pid {pid}, last heartbeat {_utc(heartbeat)} UTC"
    crashes = entry.get("crashes", "?")
    if entry.get("outcome") != states.ABANDONED:
        became = (
            "Returned to pending without spending an attempt "
            f"(crash {crashes} of at most {entry.get('max_crashes', '?')})."
        )
    elif entry.get("policy") == "park":
        became = 'Parked as abandoned (on_crash="park"): retry or discard it by hand.'
    else:
        became = (
            f"Parked as abandoned after {crashes} crashes (MAX_CRASHES): "
            "retry or discard it by hand."
        )
    return (
        f"{entry.get('reason') or 'The worker was lost.'} Worker {entry.get('worker') or '?'} "
        f"({registered}), lease held until {_utc(entry.get('lease_until'))} UTC. {became}"
    )


def _utc(value: Any) -> str:
    """An ISO 8601 time of an entry as UTC to the second, the way the log lines read."""
    try:
        moment = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return str(value) if value is not None else "?"
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")
