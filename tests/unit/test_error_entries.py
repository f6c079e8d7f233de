"""Error entries every database stores: texts escaped and capped, whatever the exception."""

import pytest

from jobqueue import conf
from jobqueue.runtime.attempt import error_entry, result_problem
from jobqueue.store.errors import (
    LAST_ERROR_LIMIT,
    MESSAGE_LIMIT,
    TRACEBACK_LIMIT,
    storable_text,
    summary,
)
from jobqueue.store.jobs import ClaimedJob, clamp_delay

JOB = ClaimedJob(
    id=7,
    task_name="t",
    queue="default",
    priority=0,
    args=[],
    kwargs={},
    attempt=2,
    max_attempts=3,
    crashes=0,
    token="x",
)


def test_a_short_clean_text_is_kept_as_it_is():
    assert storable_text("héllo ✓", 100) == "héllo ✓"


def test_nul_bytes_and_lone_surrogates_are_escaped():
    kept = storable_text("a\x00b\ud800c", 100)
    assert kept == "a\\x00b\\ud800c"
    assert kept.isascii()  # valid UTF-8 without NUL bytes: PostgreSQL stores it


def test_a_long_text_keeps_its_head_and_tail_and_says_how_much_was_cut():
    text = "H" * 1000 + "m" * 1_000_000 + "T" * 1000
    kept = storable_text(text, 10_000)
    assert len(kept) <= 10_000
    assert kept.startswith("H" * 1000) and kept.endswith("T" * 1000)
    head, marker, tail = kept.partition(" … [")
    cut = int(marker and tail.split(" characters cut] … ")[0].replace(",", ""))
    assert len(head) + cut + len(tail.split(" characters cut] … ")[1]) == len(text)


def test_escapes_in_a_long_text_stay_within_the_limit():
    kept = storable_text("\x00" * 50_000, 1000)
    assert len(kept) <= 1000 and "\x00" not in kept and "characters cut" in kept


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no text")


def test_an_exception_whose_str_raises_still_makes_an_entry():
    try:
        raise Unprintable()
    except Unprintable as exc:
        entry = error_entry(exc, JOB, "w1")
    assert entry["message"] == "<str() of the Unprintable raised RuntimeError: no text>"
    assert entry["type"].endswith("Unprintable") and entry["attempt"] == 2
    assert "Unprintable" in entry["traceback"]


def test_a_huge_message_is_capped_in_the_entry_and_in_last_error():
    try:
        raise ValueError("y" * 5_000_000)
    except ValueError as exc:
        entry = error_entry(exc, JOB, "w1")
    assert len(entry["message"]) <= MESSAGE_LIMIT
    assert len(entry["traceback"]) <= TRACEBACK_LIMIT
    assert "characters cut" in entry["message"] and "characters cut" in entry["traceback"]
    assert len(summary(entry)) <= LAST_ERROR_LIMIT
    assert summary(entry).startswith("ValueError: yyy")


@pytest.mark.parametrize(
    ("seconds", "clamped"),
    [(-5, 0.0), (3.5, 3.5), (conf.MAX_DELAY, conf.MAX_DELAY), (1e12, conf.MAX_DELAY)],
)
def test_delays_are_clamped_to_zero_and_max_delay(seconds, clamped):
    assert clamp_delay(seconds) == clamped


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"a": "\x00"}, "at result['a']: a string that contains a NUL byte"),
        ([["\udfff"]], "at result[0][0]: a string that contains the lone surrogate"),
        (10**5000, "at result: an integer of"),
        (object(), "at result: a builtins.object"),
    ],
    ids=["nul", "surrogate", "huge-int", "object"],
)
def test_a_result_is_checked_with_the_rules_of_enqueue(value, words):
    assert words in result_problem(value)


def test_a_storable_result_has_no_problem():
    assert result_problem({"rows": [1, 2.5, "ü", None, True]}) is None
