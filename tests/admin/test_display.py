"""display.moment(): the one way the admin shows a time."""

import datetime as dt
import zoneinfo

from jobqueue.console import display

NOW = dt.datetime(2026, 12, 1, 16, 15, 3, tzinfo=dt.UTC)


def test_a_time_of_today_reads_to_the_second_with_the_exact_time_and_age_on_hover():
    html = display.moment(NOW - dt.timedelta(minutes=3, seconds=2), now=NOW)
    assert html == (
        '<time datetime="2026-12-01T16:12:01+00:00" title="2026-12-01 16:12:01 UTC '
        '(3\xa0minutes ago)" class="jobqueue-time">16:12:01</time>'
    )


def test_another_day_carries_its_date():
    html = display.moment(NOW - dt.timedelta(days=1, seconds=1), now=NOW)
    assert ">2026-11-30 16:15:02</time>" in html and "(1\xa0day ago)" in html


def test_under_a_minute_and_in_the_future():
    assert "(12 seconds ago)" in display.moment(NOW - dt.timedelta(seconds=12), now=NOW)
    assert "(in 1 second)" in display.moment(NOW + dt.timedelta(seconds=1), now=NOW)
    assert "(in 2\xa0hours)" in display.moment(NOW + dt.timedelta(hours=2), now=NOW)


def test_six_attempts_a_second_apart_read_apart():
    texts = {display.moment(NOW - dt.timedelta(seconds=n), now=NOW) for n in range(6)}
    assert len(texts) == 6


def test_the_admins_time_zone(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    html = display.moment(NOW, now=NOW)
    assert ">17:15:03</time>" in html and 'title="2026-12-01 17:15:03 CET' in html


def test_a_tick_keeps_its_schedules_zone_and_says_it():
    tick = NOW.astimezone(zoneinfo.ZoneInfo("America/New_York"))
    assert ">2026-12-01 11:15:03 EST</time>" in display.tick(tick)


def test_nothing_is_a_dash():
    assert display.moment(None) == "\N{EM DASH}"
    assert display.tick(None) == "\N{EM DASH}"
    assert display.pretty_json(None) == display.pretty_json([]) == "\N{EM DASH}"
    assert display.pretty_json(0) != "\N{EM DASH}"  # a zero is a value
