"""Storage: the job's life in rows. ``Store`` (every status change), its vendor statements'
callers, the states, the operator's transitions, pauses, and the words and entries a
failure is written down as.

``jobqueue.store`` is a public path (``from jobqueue.store import Store``). The name is
looked up when first asked for, not at import: ``jobqueue.models`` and ``jobqueue.conf`` import
``jobqueue.store.states``, which must not pull the whole store in before the models exist.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobqueue.store.errors import UnstorableOutcome
    from jobqueue.store.jobs import Store

# UnstorableOutcome: the path its entries have always named (``jobqueue.store.errors``).
__all__ = ["Store", "UnstorableOutcome"]


def __getattr__(name: str) -> Any:
    if name == "Store":
        from jobqueue.store.jobs import Store

        return Store
    if name == "UnstorableOutcome":
        from jobqueue.store.errors import UnstorableOutcome

        return UnstorableOutcome
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
