"""The curriculum's pacing schedule and the run's example order (pure Python, no torch): which
examples are eligible in each epoch, that each epoch trains on each of its examples once, that
the order is a function of the seed and the position only (resume), and that without a
curriculum it is the seeded shuffle Steplab's trainers always used."""

from __future__ import annotations

import random

import pytest

from trainer_core.training.curriculum import (
    ExampleOrder,
    eligible_count,
    pacing_ratio,
    rank_easiest_first,
)


def test_the_ratio_widens_linearly_over_the_warmup_epochs():
    ratios = [pacing_ratio(e, start_ratio=0.3, warmup_epochs=2) for e in range(4)]
    assert ratios == pytest.approx([0.3, 0.65, 1.0, 1.0])
    assert [pacing_ratio(e, start_ratio=0.3, warmup_epochs=1) for e in (0, 1, 5)] == [
        0.3,
        1.0,
        1.0,
    ]
    assert pacing_ratio(0, start_ratio=0.3, warmup_epochs=0) == 1.0  # no warmup: everything


def test_eligible_counts_round_up_and_never_reach_zero():
    assert eligible_count(10, 0, start_ratio=0.3, warmup_epochs=1) == 3  # 0.3 * 10, not 4
    assert eligible_count(7, 0, start_ratio=0.3, warmup_epochs=1) == 3  # ceil(2.1)
    assert eligible_count(3, 0, start_ratio=0.1, warmup_epochs=1) == 1  # ceil(0.3)
    assert eligible_count(1000, 0, start_ratio=0.0001, warmup_epochs=1) == 1
    assert eligible_count(7, 1, start_ratio=0.3, warmup_epochs=1) == 7


def test_ranking_is_by_key_with_seeded_ties():
    keys = [(3,), (1,), (2,), (1,), (0,), (2,)]
    rank = rank_easiest_first(keys, seed=5)
    assert [keys[i] for i in rank] == sorted(keys)
    assert rank == rank_easiest_first(keys, seed=5)  # the same in every process
    ties = {tuple(rank_easiest_first([(0,)] * 6, seed=s)) for s in range(8)}
    assert len(ties) > 1  # ties are broken by the seed, not by position


def test_each_epoch_trains_on_its_eligible_examples_once_each():
    n, rank = 10, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
    order = ExampleOrder(n, seed=3, rank=rank, start_ratio=0.3, warmup_epochs=2)
    assert [order.size(e) for e in range(4)] == [3, 7, 10, 10]  # ceil(10 * 0.65) = 7
    assert [order.eligible(e) for e in range(2)] == [[9, 8, 7], [9, 8, 7, 6, 5, 4, 3]]
    assert order.warmup_positions() == 10
    position = 0
    for epoch in range(4):
        seen = [order.at(p) for p in range(position, position + order.size(epoch))]
        assert sorted(seen) == sorted(order.eligible(epoch)), epoch  # a permutation
        assert order.locate(position) == (epoch, 0)
        position += order.size(epoch)
    # the eligible sets only grow: an example once in stays in
    for epoch in range(3):
        assert set(order.eligible(epoch)) <= set(order.eligible(epoch + 1))


def test_which_examples_each_step_may_train_on():
    """Batches of 4 over 10 examples ranked 0 (easiest) to 9, start 0.3, warmup 2: step 1
    (positions 0-3) is epoch 0 (the 3 easiest) and the start of epoch 1 (the 7 easiest); epoch
    2 (positions 10-19, from step 3 on) trains on every example once."""
    order = ExampleOrder(10, seed=0, rank=list(range(10)), start_ratio=0.3, warmup_epochs=2)

    def batch(step: int) -> list[int]:
        return [order.at(p) for p in range(4 * (step - 1), 4 * step)]

    first = batch(1)
    assert set(first[:3]) == {0, 1, 2} and first[3] < 7
    assert all(i < 7 for i in batch(2))
    assert all(i < 7 for i in batch(3)[:2])  # positions 8-9: the end of epoch 1
    assert {order.locate(p)[0] for p in range(10, 20)} == {2}
    assert set(range(10)) == {order.at(p) for p in range(10, 20)}


def test_the_order_is_a_function_of_the_seed_and_the_position_only():
    kwargs = dict(seed=11, rank=rank_easiest_first([(i % 4,) for i in range(9)], seed=11))
    a = ExampleOrder(9, start_ratio=0.5, warmup_epochs=3, **kwargs)
    b = ExampleOrder(9, start_ratio=0.5, warmup_epochs=3, **kwargs)  # a resumed run
    forward = [a.at(p) for p in range(60)]
    assert [b.at(p) for p in reversed(range(60))] == forward[::-1]  # any access order
    c = ExampleOrder(9, start_ratio=0.5, warmup_epochs=3, seed=12, rank=kwargs["rank"])
    assert [c.at(p) for p in range(60)] != forward


def test_without_a_curriculum_each_epoch_is_the_seeded_shuffle_of_everything():
    order = ExampleOrder(7, seed=4)
    for epoch in range(3):
        expected = list(range(7))
        random.Random(4 * 1_000_003 + epoch).shuffle(expected)
        assert [order.at(7 * epoch + k) for k in range(7)] == expected
    assert order.ratio(0) == 1.0 and order.size(0) == 7


def test_a_bad_rank_is_refused():
    with pytest.raises(ValueError, match="permutation"):
        ExampleOrder(3, seed=0, rank=[0, 0, 1])
    with pytest.raises(ValueError, match="at least one"):
        ExampleOrder(0, seed=0)
