"""A run's exposure counts (RunExposure, one numba pass over the lists) equal the appearances of each
item in every unit's top k counted in Python, at every cutoff; added in two chunks of units they
equal the counts of the whole run."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from measure_build import rankings_of

from recsys_eval.measure.beyond import RunExposure

N_ITEMS = 9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, N_ITEMS - 1), max_size=N_ITEMS, unique=True), min_size=1, max_size=6),
       st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True))
def test_exposure_counts_equal_the_top_k_appearances(lists, cutoffs):
    cutoffs = sorted(cutoffs)
    whole = RunExposure(N_ITEMS, cutoffs, np.ones(N_ITEMS, dtype=bool))
    whole.add(rankings_of(lists))
    want = [[sum(item in top[:k] for top in lists) for item in range(N_ITEMS)] for k in cutoffs]
    assert whole.counts.tolist() == want
    assert whole.ranked.tolist() == [any(item in top for top in lists) for item in range(N_ITEMS)]
    chunked = RunExposure(N_ITEMS, cutoffs, np.ones(N_ITEMS, dtype=bool))
    half = len(lists) // 2
    for part in (lists[:half], lists[half:]):
        if part:
            chunked.add(rankings_of(part))
    assert np.array_equal(chunked.counts, whole.counts) and np.array_equal(chunked.ranked, whole.ranked)


RUN_LEVEL = ["prediction_coverage", "catalog_coverage", "gini", "entropy", "pop_rsp", "pop_reo"]


def test_counts_saved_after_a_chunk_and_restored_go_on_to_the_values_of_a_run_never_stopped():
    """A resumed fold adds to new counts a partition's state as its last finished chunk saved it, then
    adds the chunks left: every run-level value (PopRSP and PopREO's float sums included) equals,
    bit for bit, that of the run that added every chunk at once, whichever chunk it stopped after;
    the saved counts are a copy, which the chunks added after saving leave as they were."""
    import polars as pl

    from recsys_eval.core.interactions import Interactions
    from recsys_eval.measure.beyond import run_exposure
    from measure_build import targets_of

    rng = np.random.default_rng(5)
    train = Interactions.from_frame(pl.DataFrame({"user": rng.integers(0, 9, 80), "item": rng.integers(0, 14, 80)})
                                    .unique())
    chunks = [(rankings_of([list(rng.permutation(train.n_items)[:6]) for _ in range(size)]),
               targets_of([{int(i): 1.0 for i in rng.choice(train.n_items, 3, replace=False)} for _ in range(size)],
                          train.n_items)) for size in (3, 4, 2)]

    def exposure():
        return run_exposure(train.n_items, [2, 5], train, RUN_LEVEL, {"head_share": 0.3})

    def exact(run) -> list[tuple[str, int | None, str]]:  # repr: NaN equals NaN, and every bit counts
        return [(name, k, repr(value)) for name, k, value in run.values(RUN_LEVEL)]

    whole = exposure()
    for chunk in chunks:
        whole.add(*chunk)
    for stop in range(1, len(chunks)):
        stopped = exposure()
        for chunk in chunks[:stop]:
            stopped.add(*chunk)
        saved = stopped.state()
        for chunk in chunks[stop:]:  # the run goes on after saving: the copy must not move
            stopped.add(*chunk)
        resumed = exposure()
        resumed.add_state(saved)
        for chunk in chunks[stop:]:
            resumed.add(*chunk)
        assert exact(resumed) == exact(whole) == exact(stopped), stop
    assert exact(exposure()) != exact(whole)  # the counts do move the values


def test_counts_added_by_measure_from_its_list_pass_equal_those_of_a_pass_of_their_own():
    """measure(exposure=...) adds the lists' counts from the per-unit metrics' list pass; whatever
    per-unit metrics it was asked (none of the pass, ones that read no relevance, or some that
    do), every count (PopREO's relevant ones included) equals, bit for bit, that of the exposure's
    own pass over the same lists."""
    import polars as pl

    from recsys_eval.core.interactions import Interactions
    from recsys_eval.measure import measure
    from recsys_eval.measure.beyond import run_exposure
    from measure_build import targets_of

    rng = np.random.default_rng(7)
    train = Interactions.from_frame(pl.DataFrame({"user": rng.integers(0, 9, 80), "item": rng.integers(0, 14, 80)})
                                    .unique())
    rankings = rankings_of([list(rng.permutation(train.n_items)[:6]) for _ in range(5)])
    targets = targets_of([{int(i): 1.0 for i in rng.choice(train.n_items, 3, replace=False)} for _ in range(5)],
                         train.n_items)
    params = {"head_share": 0.3}
    own = run_exposure(train.n_items, [2, 5], train, RUN_LEVEL, params)
    own.add(rankings, targets)
    for metrics in (["ndcg"], ["arp", "aplt"], ["epc", "serendipity"]):
        added = run_exposure(train.n_items, [2, 5], train, RUN_LEVEL, params)
        measure(rankings, targets, metrics=metrics, k=[2, 5], train=train, exposure=added, **params)
        assert {name: value.tolist() for name, value in added.state().items()} == \
            {name: value.tolist() for name, value in own.state().items()}, metrics
    assert own.state()["parity_listed_relevant"].sum() > 0  # the relevant counts are compared, not zeros
