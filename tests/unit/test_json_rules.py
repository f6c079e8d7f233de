"""``json_problem``: one rule for arguments, results and step values, on every database."""

import pytest

from jobqueue.tasks.arguments import MAX_NESTING, int_problem, json_problem, text_problem


def nested(depth, leaf=0):
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        "",
        "plain",
        "naïve 日本 😀",
        2**63 - 1,
        -(2**63),
        1.5,
        1e308,
        [1, "two", {"three": [3.0, None]}],
        (1, 2),
        nested(MAX_NESTING - 1),
    ],
)
def test_storable_values_have_no_problem(value):
    assert json_problem(value, "") is None


@pytest.mark.parametrize(
    ("value", "path", "reason"),
    [
        ("a\x00", "", "a string that contains a NUL byte (\\x00)"),
        (["ok", "\ud800"], "[1]", "a string that contains the lone surrogate '\\ud800'"),
        ({"a": {"b\x00": 1}}, "['a']", "dict key 'b\\x00' contains a NUL byte"),
        ({"a": [2**63]}, "['a'][0]", "9223372036854775808 is outside the signed 64-bit range"),
        ([-(2**63) - 1], "[0]", "is outside the signed 64-bit range -2**63 .. 2**63-1"),
        (nested(MAX_NESTING + 1), "['k']" * 6 + "...", "nest more than 100 levels deep"),
        (float("nan"), "", "nan is not a finite number"),
        ({1: 2}, "", "dict key 1 is a int, not a str"),
        ({"when": object()}, "['when']", "a builtins.object"),
    ],
)
def test_the_first_problem_is_its_path_and_a_reason(value, path, reason):
    problem = json_problem(value, "")
    assert problem is not None
    assert problem[0] == path
    assert reason in problem[1]


def test_a_huge_integer_is_described_not_printed():
    # str() of it raises ValueError (over 4,300 digits): the reason must not need it.
    assert json_problem([10**5000], "") == (
        "[0]",
        "an integer of 16,610 bits is outside the signed 64-bit range -2**63 .. 2**63-1",
    )


def test_the_path_given_is_the_prefix():
    assert json_problem({"x": "\x00"}, "result") == (
        "result['x']",
        "a string that contains a NUL byte (\\x00), which PostgreSQL cannot store in text or JSON",
    )


def test_a_cycle_is_a_problem_not_a_recursion_error():
    loop: dict = {}
    loop["self"] = loop
    problem = json_problem(loop, "")
    assert problem is not None and "nest more than" in problem[1]


def test_text_and_int_helpers():
    assert text_problem("fine") is None and text_problem("é") is None
    assert "NUL" in text_problem("\x00")
    assert "lone surrogate '\\udfff' at offset 1" in text_problem("a\udfff")
    assert int_problem(2**63 - 1) is None and int_problem(2**63) is not None
