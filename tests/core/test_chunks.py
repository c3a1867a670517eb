"""core.chunks.map_in_order: a loop's results in the loop's order, with a bounded read-ahead."""

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core.chunks import map_in_order


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 1e-3), max_size=12), st.integers(1, 3), st.integers(1, 4))
def test_results_come_in_the_items_order(delays, workers, ahead):
    """Later items that finish first still come after earlier ones: the results are a loop's."""
    def slow_square(pair):
        index, delay = pair
        time.sleep(delay)
        return index * index

    items = list(enumerate(delays))
    assert list(map_in_order(slow_square, items, workers=workers, ahead=ahead)) == [i * i for i, _ in items]


@pytest.mark.parametrize("ahead", [1, 2, 3])
def test_no_more_than_ahead_items_are_taken_before_their_results(ahead):
    taken, yielded, most = [], [], []

    def items():
        for i in range(10):
            taken.append(i)
            most.append(len(taken) - len(yielded))
            yield i

    for result in map_in_order(lambda i: i, items(), ahead=ahead):
        yielded.append(result)
    assert yielded == list(range(10))
    assert max(most) == ahead


def test_two_items_run_at_once():
    """Two workers: the first call waits until the second has started, which one thread never allows."""
    second_started = threading.Event()

    def call(i):
        if i == 0:
            assert second_started.wait(10), "the second item did not start while the first ran"
        else:
            second_started.set()
        return i

    assert list(map_in_order(call, [0, 1], workers=2, ahead=2)) == [0, 1]


def test_a_call_that_raises_raises_where_its_result_is_reached():
    def call(i):
        if i == 2:
            raise ValueError("item 2")
        return i

    results = map_in_order(call, range(5))
    assert [next(results), next(results)] == [0, 1]
    with pytest.raises(ValueError, match="item 2"):
        next(results)
