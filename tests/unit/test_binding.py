"""The quick argument check agrees with Signature.bind on every call it decides."""

import inspect

import pytest

from jobqueue.tasks.arguments import _bind, _Parameters, bind_arguments


def positional(a, b): ...


def defaults(a, b=2, *, c, d=4): ...


def positional_only(a, /, b=1): ...


def var_args(a, *rest, **named): ...


class FakeTask:
    def __init__(self, func):
        self.name = func.__name__
        self.signature = inspect.signature(func)


CALLS = [
    (positional, (1, 2), {}),
    (positional, (1,), {"b": 2}),
    (positional, (), {"b": 2, "a": 1}),
    (positional, (1,), {}),
    (positional, (1, 2, 3), {}),
    (positional, (1,), {"a": 2}),
    (positional, (1, 2), {"z": 3}),
    (defaults, (1,), {"c": 3}),
    (defaults, (1,), {"d": 5, "c": 3, "b": 0}),
    (defaults, (1, 2, 3), {}),
    (defaults, (1,), {}),
    (positional_only, (1,), {}),
    (positional_only, (), {"a": 1}),
    (positional_only, (1,), {"b": [2.5]}),
    (var_args, (1, 2, 3), {"x": 4}),
]


@pytest.mark.parametrize(("func", "args", "kwargs"), CALLS)
def test_the_quick_check_binds_as_signature_bind_does(func, args, kwargs):
    task = FakeTask(func)
    try:
        expected = _bind(task, args, kwargs)
    except TypeError:
        expected = None  # the quick check must leave it to bind(), which explains
    parameters = _Parameters.of(task)
    quick = parameters.bind(args, kwargs) if parameters is not None else None
    assert quick is None or quick == expected
    if expected is not None and func is not var_args:
        assert quick == expected  # a plain signature never needs the slow path to accept


def test_a_bad_value_is_named_whichever_path_binds_it():
    task = FakeTask(defaults)
    with pytest.raises(TypeError, match=r"argument 'c' is not JSON-serialisable"):
        bind_arguments(task, (1,), {"d": 4, "c": object()})
    with pytest.raises(TypeError, match=r"argument 'd'\[0\] is not JSON-serialisable"):
        bind_arguments(task, (1,), {"d": [float("inf")], "c": 1})
    with pytest.raises(TypeError, match=r"defaults: missing a required argument: 'c'"):
        bind_arguments(task, (1,), {})
    with pytest.raises(TypeError, match=r"argument 'x' is not JSON-serialisable"):
        bind_arguments(FakeTask(var_args), (1,), {"x": {1}})


def test_a_replaced_signature_is_read_again():
    task = FakeTask(positional)
    bind_arguments(task, (1, 2), {})
    task.signature = inspect.signature(positional_only)
    bind_arguments(task, (1,), {})
    with pytest.raises(TypeError, match="missing a required argument: 'a'"):
        bind_arguments(task, (), {"b": 1})
