"""Only the dialects ask which database they are on, read from the source with ``ast``.

Every difference between PostgreSQL, SQLite and MySQL is a dialect's (``jobqueue/sql/``):
the rest of the package asks the dialect a question ("how are workers woken here?",
"was this connection left in a transaction?"), never the vendor's name. The system checks
(``checks.py``), which report on the configured database, and the migrations, which build
one vendor's schema, are the exceptions. Anywhere else this fails on a read of a
connection's ``vendor`` or MySQL's ``mysql_is_mariadb``, on a vendor flag of the kind the
old ``Queries`` had (``is_postgresql``), and on a comparison with a vendor's name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jobqueue

PACKAGE = Path(jobqueue.__file__).parent
# Where asking the vendor is the point.
ALLOWED = ("sql/", "checks.py", "migrations/")
VENDOR_ATTRIBUTES = {"vendor", "mysql_is_mariadb", "is_postgresql", "is_mysql", "is_sqlite"}
VENDOR_NAMES = {"postgresql", "sqlite", "mysql"}


def vendor_questions(source: str) -> list[str]:
    """``line: what`` for each place ``source`` asks which database it is on."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in VENDOR_ATTRIBUTES:
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Name) and node.id in VENDOR_ATTRIBUTES - {"vendor"}:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                if isinstance(operand, ast.Constant) and operand.value in VENDOR_NAMES:
                    found.append((node.lineno, f"compared with {operand.value!r}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def questions_outside_the_dialects() -> dict[str, list[str]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(ALLOWED):
            continue
        questions = vendor_questions(path.read_text())
        if questions:
            found[relative] = questions
    return found


def test_the_finder_finds_each_kind_of_question():
    source = """
if connection.vendor == "sqlite": ...
if connections[alias].vendor in SUPPORTED: ...
if queries.is_postgresql: ...
is_mysql = False
mariadb = conn.mysql_is_mariadb
if kind != "mysql": ...
"""
    assert vendor_questions(source) == [
        "2: .vendor",
        "2: compared with 'sqlite'",
        "3: .vendor",
        "4: .is_postgresql",
        "5: is_mysql",
        "6: .mysql_is_mariadb",
        "7: compared with 'mysql'",
    ]
    # A docstring or a comment that names a vendor asks nothing.
    assert vendor_questions('"""On PostgreSQL, connection.vendor == "postgresql"."""') == []


def test_the_package_is_read_and_the_dialects_do_ask():
    # Guards the test below against passing on a misread package: the places allowed to
    # ask do.
    assert vendor_questions((PACKAGE / "sql" / "__init__.py").read_text())
    assert vendor_questions((PACKAGE / "checks.py").read_text())
    assert (PACKAGE / "runtime" / "service.py").exists()


def test_no_vendor_question_outside_the_dialects_the_checks_and_the_migrations():
    found = questions_outside_the_dialects()
    assert not found, (
        "asks which database it is on outside jobqueue/sql/ (ask the dialect instead: "
        "jobqueue.sql.Queries(using) or jobqueue.sql.dialect_class(connection)): "
        + "; ".join(f"{path} {', '.join(lines)}" for path, lines in found.items())
    )
