"""ScheduleSpec's ticks, with explicit datetimes: every N seconds, cron, DST in Europe/Berlin."""

import datetime as dt
import itertools
from zoneinfo import ZoneInfo

import pytest

from jobqueue.schedules.spec import ScheduleSpec

UTC = dt.UTC
BERLIN = ZoneInfo("Europe/Berlin")


def every(seconds):
    return ScheduleSpec(name="s", task_name="t", cron=None, every=seconds, timezone="UTC")


def cron(expression, zone="Europe/Berlin"):
    return ScheduleSpec(name="s", task_name="t", cron=expression, every=None, timezone=zone)


def berlin(*args, fold=0):
    """A Berlin wall-clock time as the instant in UTC: aware datetimes in the repeated hour
    never compare equal across zones (PEP 495), and ticks come back in UTC."""
    return dt.datetime(*args, tzinfo=BERLIN, fold=fold).astimezone(UTC)


def ticks(spec, start, count):
    found, moment = [], start
    for _ in range(count):
        moment = spec.next_after(moment)
        found.append(moment)
    return found


# -- every ---------------------------------------------------------------------------------


def test_every_ticks_at_multiples_of_its_period_since_the_epoch():
    spec = every(30)
    moment = dt.datetime(2026, 5, 1, 12, 0, 10, tzinfo=UTC)
    assert spec.next_after(moment) == dt.datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC)
    assert spec.latest_at_or_before(moment) == dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    # Whatever zone the moment is given in, the ticks are the same instants.
    assert spec.next_after(moment.astimezone(BERLIN)) == spec.next_after(moment)


def test_every_tick_is_strictly_after_and_at_or_before():
    spec = every(30)
    on_tick = dt.datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC)
    assert spec.next_after(on_tick) == on_tick + dt.timedelta(seconds=30)
    assert spec.latest_at_or_before(on_tick) == on_tick


def test_every_with_a_fractional_period():
    spec = every(0.25)
    moment = dt.datetime(2026, 5, 1, 12, 0, 0, 300_000, tzinfo=UTC)
    assert spec.next_after(moment) == dt.datetime(2026, 5, 1, 12, 0, 0, 500_000, tzinfo=UTC)
    assert spec.definition == "every 0.25"
    assert spec.expression == "every 0.25 s"


def test_every_ignores_daylight_saving_it_counts_seconds():
    # 02:00 -> 03:00 in Berlin: an hourly "every" still ticks every 3,600 s.
    spec = every(3600)
    found = ticks(spec, berlin(2026, 3, 29, 0, 30), 3)
    assert [b - a for a, b in itertools.pairwise(found)] == [dt.timedelta(hours=1)] * 2


def test_every_definition_and_expression():
    assert every(30).definition == "every 30"
    assert every(30.0).definition == "every 30"
    assert every(30).expression == "every 30 s"


# -- cron ----------------------------------------------------------------------------------


def test_cron_ticks_in_the_schedules_time_zone():
    spec = cron("0 3 * * *")
    # 03:00 in Berlin in winter is 02:00 UTC, in summer 01:00 UTC.
    assert spec.next_after(dt.datetime(2026, 1, 10, 12, 0, tzinfo=UTC)) == dt.datetime(
        2026, 1, 11, 2, 0, tzinfo=UTC
    )
    assert spec.next_after(dt.datetime(2026, 7, 10, 12, 0, tzinfo=UTC)) == dt.datetime(
        2026, 7, 11, 1, 0, tzinfo=UTC
    )
    assert spec.definition == "cron 0 3 * * * Europe/Berlin"
    assert spec.expression == "0 3 * * *"


def test_cron_next_after_is_strict_and_latest_includes_the_moment():
    spec = cron("*/5 * * * *", zone="UTC")
    on_tick = dt.datetime(2026, 5, 1, 12, 5, tzinfo=UTC)
    assert spec.next_after(on_tick) == dt.datetime(2026, 5, 1, 12, 10, tzinfo=UTC)
    assert spec.latest_at_or_before(on_tick) == on_tick
    assert spec.latest_at_or_before(on_tick + dt.timedelta(seconds=59)) == on_tick
    assert spec.latest_at_or_before(on_tick - dt.timedelta(microseconds=1)) == dt.datetime(
        2026, 5, 1, 12, 0, tzinfo=UTC
    )


def test_cron_latest_missed_tick_after_days_of_downtime():
    spec = cron("0 3 * * *")
    back = berlin(2026, 1, 14, 9, 0)
    assert spec.latest_at_or_before(back) == berlin(2026, 1, 14, 3, 0)


def test_cron_weekdays():
    spec = cron("0 9 * * MON-FRI")
    friday_noon = berlin(2026, 1, 16, 12, 0)
    assert spec.next_after(friday_noon) == berlin(2026, 1, 19, 9, 0)  # Monday


# -- daylight saving, Europe/Berlin: 2026-03-29 02:00 -> 03:00, 2026-10-25 03:00 -> 02:00 ----


def test_spring_a_daily_run_in_the_skipped_hour_runs_once_just_after_the_jump():
    spec = cron("30 2 * * *")
    found = ticks(spec, berlin(2026, 3, 28, 12, 0), 3)
    assert found == [
        berlin(2026, 3, 29, 3, 0),  # 02:30 does not exist that night: at once after the jump
        berlin(2026, 3, 30, 2, 30),
        berlin(2026, 3, 31, 2, 30),
    ]
    # One run each day: no day loses its run.
    assert [t.astimezone(BERLIN).date() for t in found] == [
        dt.date(2026, 3, 29),
        dt.date(2026, 3, 30),
        dt.date(2026, 3, 31),
    ]


def test_spring_a_daily_run_outside_the_skipped_hour_keeps_its_wall_time():
    spec = cron("0 3 * * *")
    found = ticks(spec, berlin(2026, 3, 28, 12, 0), 2)
    assert found == [berlin(2026, 3, 29, 3, 0), berlin(2026, 3, 30, 3, 0)]
    # The night is an hour shorter: 23 hours between the two runs around it.
    assert found[0] - spec.latest_at_or_before(berlin(2026, 3, 28, 12, 0)) == dt.timedelta(hours=23)


def test_autumn_a_daily_run_in_the_repeated_hour_runs_once():
    spec = cron("30 2 * * *")
    found = ticks(spec, berlin(2026, 10, 24, 12, 0), 3)
    assert found == [
        berlin(2026, 10, 25, 2, 30),  # the first 02:30 (summer time), not the second
        berlin(2026, 10, 26, 2, 30),
        berlin(2026, 10, 27, 2, 30),
    ]
    assert found[0].astimezone(BERLIN).utcoffset() == dt.timedelta(hours=2)
    # And from inside the repeated hour, after the first 02:30: the next is tomorrow's.
    second_pass = berlin(2026, 10, 25, 2, 45, fold=1)
    assert spec.next_after(second_pass) == berlin(2026, 10, 26, 2, 30)
    assert spec.latest_at_or_before(second_pass) == berlin(2026, 10, 25, 2, 30)


def test_autumn_a_frequent_run_ticks_in_both_passes_of_the_repeated_hour_never_twice_at_once():
    # "*/30": every half hour of real time; the repeated hour's two 02:00s are an hour apart.
    spec = cron("*/30 * * * *")
    found = ticks(spec, berlin(2026, 10, 25, 1, 50), 6)
    assert len(set(found)) == 6
    assert [b - a for a, b in itertools.pairwise(found)] == [dt.timedelta(minutes=30)] * 5


@pytest.mark.parametrize("start", [berlin(2026, 3, 1, 0, 0), berlin(2026, 10, 1, 0, 0)])
def test_a_month_across_a_transition_has_exactly_one_daily_run_per_day(start):
    spec = cron("30 2 * * *")
    found = ticks(spec, start, 31)
    days = [t.astimezone(BERLIN).date() for t in found]
    first = start.astimezone(BERLIN).date()
    assert days == [first + dt.timedelta(days=n) for n in range(31)]
