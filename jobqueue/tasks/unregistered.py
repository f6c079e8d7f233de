"""The words for pending jobs whose task no live worker has registered: the per-task counts
and the warning, said alike by the worker's chore, ``jobs queues`` and the admin."""

from __future__ import annotations

from collections.abc import Iterable

# What to do about a task no live worker has registered, said wherever one is named.
REGISTER_HINT = (
    "A worker claims only tasks it imported: define them in an installed app's tasks.py "
    'or list their modules in JOBQUEUE["TASK_MODULES"].'
)
# A message names at most this many tasks, the ones with the most jobs first.
NAMED_TASKS = 20


def by_task(rows: Iterable[tuple[str, str, int]]) -> dict[str, int]:
    """``(queue, task_name, count)`` rows summed per task, most jobs first."""
    totals: dict[str, int] = {}
    for _, task_name, count in rows:
        totals[task_name] = totals.get(task_name, 0) + count
    return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def name_counts(counts: dict[str, int], limit: int = NAMED_TASKS) -> str:
    """``"a (3), b (1)"``, in the given order; past ``limit`` names, how many more."""
    named = [f"{name} ({n})" for name, n in list(counts.items())[:limit]]
    if len(counts) > limit:
        named.append(f"and {len(counts) - limit} more task(s)")
    return ", ".join(named)


def warning(counts: dict[str, int]) -> str:
    """The worker's warning about pending jobs of tasks no live worker has registered."""
    return (
        f"{sum(counts.values())} pending job(s) of task(s) no live worker has registered: "
        f"{name_counts(counts)}. {REGISTER_HINT}"
    )
