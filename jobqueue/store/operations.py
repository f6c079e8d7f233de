"""What an operator's Retry or Discard acts on, and the report it gives back.

A selection is a list of job ids or a queryset of jobs (the admin's changelist filter, the
command's ``--status``/``--queue``/``--task``). Either becomes a subquery of ONE statement in
:mod:`jobqueue.store`, so 10,000 jobs cost the same single ``UPDATE`` as one. The
:class:`Outcome` says how many were done and why the rest were skipped, in the same words
for the admin, the commands and scripts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from django.db.models import QuerySet
from django.utils.functional import Promise
from django.utils.translation import gettext, ngettext, ngettext_lazy

if TYPE_CHECKING:
    from jobqueue.models import Job
    from jobqueue.sql import Dialect

Action = Literal["retry", "discard"]
# Job ids, or a queryset of jobs (models are not imported here: this module loads early).
Selection: TypeAlias = "QuerySet[Job] | Iterable[int]"

# Why a selected job was left alone, by reason code. A status as a code means the job was in
# that status, which the operation does not accept.
REASONS: dict[str, Promise] = {
    "missing": ngettext_lazy("it no longer exists", "they no longer exist", "count"),
    "pending": ngettext_lazy("it is already pending", "they are already pending", "count"),
    "running": ngettext_lazy("it is running", "they are running", "count"),
    "succeeded": ngettext_lazy("it succeeded", "they succeeded", "count"),
    "discarded": ngettext_lazy("it is already discarded", "they are already discarded", "count"),
    "lease": ngettext_lazy(
        "its lease is still held, so its worker may still be running it",
        "their leases are still held, so their workers may still be running them",
        "count",
    ),
    "key": ngettext_lazy(
        "a newer unfinished job holds its idempotency key",
        "newer unfinished jobs hold their idempotency keys",
        "count",
    ),
    "changed": ngettext_lazy(
        "it changed while the operation ran", "they changed while the operation ran", "count"
    ),
}

_PLACEHOLDER = re.compile(r"%%|%s")


@dataclass(frozen=True)
class SelectionSQL:
    """A selection as a subquery of job ids, with named parameters."""

    sql: str
    params: dict[str, Any]
    # How many distinct ids were asked for; None for a filter.
    requested: int | None


def compile_selection(selection: Selection, queries: Dialect) -> SelectionSQL:
    """Turn ids or a queryset of jobs into the ``{selection}`` subquery of a statement."""
    if isinstance(selection, QuerySet):
        if selection.model._meta.label != "jobqueue.Job":
            raise TypeError(f"expected a queryset of jobqueue.Job, got {selection.model}")
        query = selection.order_by().values("pk").query
        sql, params = query.get_compiler(using=queries.using).as_sql()
        # Django compiles with positional %s; the named statements use %(name)s, and one
        # statement cannot mix the two. A literal percent sign is already written %%.
        named: dict[str, Any] = {}

        def name(match: re.Match[str]) -> str:
            if match.group() == "%%":
                return "%%"
            key = f"selection_{len(named)}"
            named[key] = params[len(named)]
            return f"%({key})s"

        return SelectionSQL(_PLACEHOLDER.sub(name, sql), named, None)
    ids = sorted({int(pk) for pk in selection})
    return SelectionSQL(queries.statements["operator_ids"], {"ids": queries.ids(ids)}, len(ids))


@dataclass
class Outcome:
    """What a Retry or Discard did: the ids done and, by reason, how many were skipped."""

    action: Action
    done: list[int] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    # Discard only: how many of the done jobs were running (their workers lost the fence).
    running: int = 0
    dry_run: bool = False

    @property
    def skipped_count(self) -> int:
        return sum(self.skipped.values())

    def merge(self, other: Outcome) -> Outcome:
        """Add another batch's outcome to this one."""
        skipped = dict(self.skipped)
        for reason, count in other.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + count
        return Outcome(
            action=self.action,
            done=[*self.done, *other.done],
            skipped=skipped,
            running=self.running + other.running,
            dry_run=self.dry_run,
        )

    def message(self) -> str:
        """One sentence: "Retried 3 jobs, skipped 1 job because it is running." """
        n = len(self.done)
        if self.action == "retry":
            if self.dry_run:
                text = ngettext("Would retry %(count)d job", "Would retry %(count)d jobs", n)
            else:
                text = ngettext("Retried %(count)d job", "Retried %(count)d jobs", n)
            text %= {"count": n}
        else:
            if self.dry_run:
                text = ngettext("Would discard %(count)d job", "Would discard %(count)d jobs", n)
            else:
                text = ngettext("Discarded %(count)d job", "Discarded %(count)d jobs", n)
            text %= {"count": n}
            if self.running:
                text += " " + ngettext(
                    "(%(count)d was running: its worker's writes are refused from now on)",
                    "(%(count)d were running: their workers' writes are refused from now on)",
                    self.running,
                ) % {"count": self.running}
        if self.skipped_count:
            text += ", " + self._skipped_text()
        return text + "."

    def _skipped_text(self) -> str:
        total = self.skipped_count
        verb = gettext("would skip") if self.dry_run else gettext("skipped")
        head = ngettext("%(verb)s %(count)d job", "%(verb)s %(count)d jobs", total) % {
            "verb": verb,
            "count": total,
        }
        reasons = sorted(self.skipped.items(), key=lambda item: (-item[1], item[0]))
        if len(reasons) == 1:
            [(reason, count)] = reasons
            return f"{head} {gettext('because')} {reason_text(reason, count)}"
        parts = [f"{count} {gettext('because')} {reason_text(r, count)}" for r, count in reasons]
        return f"{head}: " + ", ".join(parts)


def reason_text(reason: str, count: int) -> str:
    """Why ``count`` jobs were skipped, in words."""
    text = REASONS.get(reason)
    if text is None:  # a status no message names yet
        return ngettext("it is %(status)s", "they are %(status)s", count) % {"status": reason}
    return str(text % {"count": count})
