"""The package's import rules, read from the source with ``ast``: no circle, no private
names, and no import from a lower layer to a higher one.

An import circle works until someone moves a line, and then fails with a half-initialised
module; a ``_name`` taken from another module is a private method handed to a collaborator.
Both are checked here for every module of ``jobqueue/``, so that neither creeps back.

The layers (``LAYERS``, as docs/development.md names them) run from storage up to the
contributed apps; a module may import its own layer's modules and those of the layers
below, never one above. Every import counts for that rule, at module level or inside a
function: a runtime that imports the admin lazily still depends on it.

The graph has an edge for every import that runs when a module is imported: the statements
at module level, including those under ``if``/``try`` and ``if TYPE_CHECKING:`` (mypy reads
those; a circle there is a circle in the types). Imports inside a function or a class body
run later, and are left out. ``from jobqueue import x`` is an edge to the submodule ``x``
when there is one, else to ``jobqueue/__init__.py``; the implicit import of a module's parent
packages is not an edge, since Python always finishes those first.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import jobqueue

PACKAGE = Path(jobqueue.__file__).parent
ROOT = "jobqueue"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found[module_name(path)] = (path, ast.parse(path.read_text(), filename=str(path)))
    return found


MODULES = modules()


def absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported(module: str, path: Path, node: ast.stmt) -> Iterator[tuple[str, str | None]]:
    """``(target module, name taken from it or None)`` for one import statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == ROOT or alias.name.startswith(ROOT + "."):
                yield alias.name, None
    elif isinstance(node, ast.ImportFrom):
        source = absolute(module, path, node)
        if source != ROOT and not source.startswith(ROOT + "."):
            return
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            if submodule in MODULES:
                yield submodule, None
            else:
                yield source, alias.name


def module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run at import: the body, and inside if/try/with, not defs."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from module_level(getattr(node, field, []))
        for handler in getattr(node, "handlers", []):
            yield from module_level(handler.body)


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for module, (path, tree) in MODULES.items():
        for node in module_level(tree.body):
            for target, _ in imported(module, path, node):
                if target != module and target in MODULES:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def private_imports() -> list[str]:
    """``module: name from other`` for each ``_name`` one module takes from another.

    Both spellings count: ``from jobqueue.x import _y``, and ``x._y`` on a module imported
    as ``x``. Dunder names (``__version__``) are not private.
    """
    found = []

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    for module, (path, tree) in MODULES.items():
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    target = f"{absolute(module, path, node)}.{alias.name}"
                    if target in MODULES:
                        aliases[alias.asname or alias.name] = target
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in MODULES:
                        aliases[alias.asname] = alias.name
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target, name in imported(module, path, node):
                    if name is not None and private(name) and target != module:
                        found.append(f"{module}: {name} from {target}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and aliases[node.value.id] != module
                and private(node.attr)
            ):
                found.append(f"{module}: {node.attr} from {aliases[node.value.id]}")
    return sorted(set(found))


# Lowest first. A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "storage",
        (
            "jobqueue.states",
            "jobqueue.conf",
            "jobqueue.exceptions",
            "jobqueue.signals",
            "jobqueue.models",
            "jobqueue.migrations",
            "jobqueue.sql",
            "jobqueue.store",
            "jobqueue.pauses",
        ),
    ),
    ("task API", ("jobqueue", "jobqueue.tasks", "jobqueue.schedules", "jobqueue.backend")),
    ("runtime", ("jobqueue.runtime",)),
    ("supervisor", ("jobqueue.supervisor",)),
    (
        "console",
        (
            "jobqueue.console",
            "jobqueue.admin",
            "jobqueue.notice",
            "jobqueue.metrics",
            "jobqueue.management",
            "jobqueue.checks",
            "jobqueue.apps",
        ),
    ),
    ("contrib", ("jobqueue.contrib", "jobqueue.testing", "jobqueue.pytest_plugin")),
)


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the layer ``module`` belongs to."""
    best, found = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    if found is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return found


def upward_imports(modules: dict[str, tuple[Path, ast.Module]] = MODULES) -> list[str]:
    """``module (layer) imports target (layer)`` for each import of a higher layer."""
    found = []
    for module, (path, tree) in modules.items():
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target, _ in imported(module, path, node):
                if target in MODULES and layer_of(target) > layer_of(module):
                    found.append(
                        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                        f"({LAYERS[layer_of(target)][0]})"
                    )
    return sorted(set(found))


def test_the_package_is_read():
    # Guards the two checks below against passing on an empty or misread package.
    assert {"jobqueue", "jobqueue.tasks.enqueue", "jobqueue.runtime.worker"} <= set(MODULES)
    assert "jobqueue.conf" in import_graph()["jobqueue.tasks.base"]


def test_the_cycle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_circle_inside_jobqueue():
    found = cycles(import_graph())
    assert not found, "import circles (module-level imports) among: " + "; ".join(
        ", ".join(group) for group in found
    )


def test_no_module_imports_a_private_name_from_another():
    found = private_imports()
    assert not found, "private names imported from another module: " + "; ".join(found)


def test_every_module_is_in_a_layer():
    assert [layer_of(module) for module in MODULES]  # raises, naming the module, if not
    assert LAYERS[layer_of("jobqueue.runtime.worker")][0] == "runtime"
    assert LAYERS[layer_of("jobqueue.store.jobs")][0] == "storage"
    assert LAYERS[layer_of("jobqueue")][0] == "task API"


def test_no_module_imports_a_higher_layer():
    found = upward_imports()
    assert not found, "imports from a lower layer to a higher one: " + "; ".join(found)


def test_the_layer_rule_finds_a_runtime_module_importing_the_admin():
    # What the rule is for: the runtime reaching into the operator's pages, at module level
    # or inside a function, in either spelling.
    for source in (
        "from jobqueue import admin\n",
        "def f():\n    from jobqueue.console import overview\n",
        "import jobqueue.console.dashboard\n",
    ):
        module = {"jobqueue.runtime.worker": (PACKAGE / "runtime" / "worker.py", ast.parse(source))}
        assert upward_imports(module), source
