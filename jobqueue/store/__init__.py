"""Storage: the job's life in rows. ``Store`` (every status change), the operator's
transitions, pauses, the entries and words a failure is written down as, and the
dashboard's statistics rows; the statuses themselves are ``jobqueue.states``.

``jobqueue.store`` is a public path (``from jobqueue.store import Store``). The name is
looked up when first asked for, not at import: ``import jobqueue`` (as Django's app loading
does, before any model may be imported) reaches ``jobqueue.store.channel``, and the
package must not pull in ``Store``'s module, which needs the models, at that moment.
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
