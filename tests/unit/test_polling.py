from jobqueue.runtime.polling import SAFETY_POLL, PollBackoff


def test_waits_double_after_each_empty_look_up_to_the_safety_poll():
    poll = PollBackoff(2)
    assert [poll.empty_look() for _ in range(6)] == [2, 4, 8, 16, 30, 30]
    assert SAFETY_POLL == 30


def test_work_found_resets_the_wait():
    poll = PollBackoff(0.5)
    poll.empty_look()
    poll.empty_look()
    poll.found_work()
    assert poll.empty_look() == 0.5


def test_a_first_wait_above_the_cap_is_capped():
    assert PollBackoff(60).empty_look() == 30
