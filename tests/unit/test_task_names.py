"""@task(name=...) is checked at decoration: a name no database or worker can use fails there."""

import pytest

from jobqueue import task
from jobqueue.tasks import base as registry


def handler():
    return None


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        (123, TypeError, "@task(name=...) must be a str, not int: 123."),
        (b"t.bytes", TypeError, "@task(name=...) must be a str, not bytes"),
        ("", ValueError, "@task(name=...) must be a non-empty string."),
        ("t.\x00nul", ValueError, "'t.\\x00nul' contains a NUL byte"),
        ("t.\ud800", ValueError, "'t.\\ud800' contains the lone surrogate '\\ud800' at offset 2"),
        ("t." + "x" * 254, ValueError, "must be at most 255 characters (the Job.task_name column)"),
    ],
)
def test_a_bad_name_fails_at_decoration_naming_name(name, error, message):
    before = registry.registered_names()
    with pytest.raises(error) as excinfo:
        task(handler, name=name)
    assert message in str(excinfo.value)
    assert registry.registered_names() == before, "nothing was registered"


def test_a_name_of_255_characters_fits():
    name = "t." + "x" * 253
    assert task(handler, name=name).name == name
    assert registry.get(name) is not None


def test_a_default_name_longer_than_the_column_asks_for_a_name():
    def long_function():
        return None

    long_function.__qualname__ = "x" * 300
    with pytest.raises(ValueError, match=r"the task's name \(its function's dotted path\) must"):
        task(long_function)
    assert task(long_function, name="t.short").name == "t.short"


def test_discovery_still_works_after_a_refused_name():
    with pytest.raises(TypeError):
        task(handler, name=42)
    names = registry.discover()
    assert all(isinstance(name, str) for name in names)
    assert "tests.testapp.tasks.add" in names


def test_a_tuple_backoff_past_the_float_range_stays_at_its_cap():
    t = task(handler, name="t.backoff", backoff=(1, 5, 3600), max_attempts=10_000)
    assert t.backoff_delay(3) == 25
    assert t.backoff_delay(5_000) == 3600, "5.0 ** 4999 overflows a float"
    zero = task(handler, name="t.zero_backoff", backoff=(0, 5, 3600))
    assert zero.backoff_delay(5_000) == 0
