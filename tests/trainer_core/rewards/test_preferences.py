"""Preference pairs: outside-in, adjacent and uncertain, on a crafted set."""

from __future__ import annotations

import random

import pytest

from trainer_core.errors import ConfigError
from trainer_core.rewards.preferences import Candidate, Pair, build_pairs

CANDIDATES = [
    Candidate("a1", "task-a", 0.9),
    Candidate("a2", "task-a", 0.8),
    Candidate("a3", "task-a", 0.5),
    Candidate("a4", "task-a", 0.5),  # tied with a3 (a3 ranks first: ids break ties)
    Candidate("a5", "task-a", 0.2),
    Candidate("b1", "task-b", 0.7),  # alone: never paired
    Candidate("c1", "task-c", 0.6),
    Candidate("c2", "task-c", 0.6 + 1e-12),  # a tie within epsilon
]


def as_tuples(pairs: list[Pair]) -> list[tuple]:
    return [(p.chosen_id, p.rejected_id, p.task_id, round(p.margin, 9), p.method) for p in pairs]


@pytest.mark.parametrize(
    ("min_margin", "expected"),
    [
        (
            0.1,
            [("a1", "a5", "task-a", 0.7, "outside_in"), ("a2", "a4", "task-a", 0.3, "outside_in")],
        ),
        (
            0.3,
            [("a1", "a5", "task-a", 0.7, "outside_in"), ("a2", "a4", "task-a", 0.3, "outside_in")],
        ),
        (0.5, [("a1", "a5", "task-a", 0.7, "outside_in")]),  # .3 inside stops the task
        (
            0.0,
            [("a1", "a5", "task-a", 0.7, "outside_in"), ("a2", "a4", "task-a", 0.3, "outside_in")],
        ),
    ],
)
def test_outside_in(min_margin, expected):
    assert (
        as_tuples(build_pairs(CANDIDATES, method="outside_in", min_margin=min_margin)) == expected
    )


@pytest.mark.parametrize(
    ("min_margin", "expected"),
    [
        # .9 - .8 is 0.0999...98 in floating point: it still counts as a margin of .1
        (0.1, [("a1", "a2", 0.1), ("a2", "a3", 0.3), ("a4", "a5", 0.3)]),
        (0.0, [("a1", "a2", 0.1), ("a2", "a3", 0.3), ("a4", "a5", 0.3)]),  # ties still skipped
        (0.2, [("a2", "a3", 0.3), ("a4", "a5", 0.3)]),
    ],
)
def test_adjacent_skips_ties(min_margin, expected):
    pairs = build_pairs(CANDIDATES, method="adjacent", min_margin=min_margin)
    assert [(p.chosen_id, p.rejected_id, round(p.margin, 9)) for p in pairs] == expected
    assert {p.method for p in pairs} == {"adjacent"}


def test_uncertain_below_the_margin_ties_included():
    pairs = build_pairs(CANDIDATES, method="uncertain", min_margin=0.2)
    assert as_tuples(pairs) == [
        ("a1", "a2", "task-a", 0.1, "uncertain"),
        ("a3", "a4", "task-a", 0.0, "uncertain"),
        ("c2", "c1", "task-c", 0.0, "uncertain"),  # c2 is 1e-12 higher: it ranks first
    ]
    wider = build_pairs(CANDIDATES, method="uncertain", min_margin=0.2, uncertain_margin=0.35)
    assert [(p.chosen_id, p.rejected_id) for p in wider] == [
        ("a1", "a2"),
        ("a2", "a3"),
        ("a3", "a4"),
        ("a4", "a5"),
        ("c2", "c1"),
    ]


def test_uncertain_in_a_band():
    pairs = build_pairs(CANDIDATES, method="uncertain", band=(0.4, 0.85))
    assert [(p.chosen_id, p.rejected_id, round(p.margin, 9)) for p in pairs] == [
        ("a2", "a3", 0.3),
        ("a3", "a4", 0.0),
        ("c2", "c1", 0.0),
    ]


def test_deterministic_whatever_the_input_order():
    expected = {
        method: build_pairs(CANDIDATES, method=method)
        for method in ("outside_in", "adjacent", "uncertain")
    }
    rng = random.Random(7)
    for _ in range(5):
        shuffled = CANDIDATES[:]
        rng.shuffle(shuffled)
        for method, pairs in expected.items():
            assert build_pairs(shuffled, method=method) == pairs


def test_integer_ids_break_ties_numerically_and_bad_scores_are_left_out():
    candidates = [
        Candidate(10, "t", 0.5),
        Candidate(9, "t", 0.5),
        Candidate(3, "t", 0.9),
        Candidate(4, "t", float("nan")),
        Candidate(5, "t", None),
    ]
    pairs = build_pairs(candidates, method="uncertain", uncertain_margin=1.0)
    assert [(p.chosen_id, p.rejected_id) for p in pairs] == [(3, 9), (9, 10)]
    assert pairs[0].to_dict() == {
        "chosen_id": 3,
        "rejected_id": 9,
        "task_id": "t",
        "margin": pytest.approx(0.4),
        "method": "uncertain",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "best_worst"}, "unknown pairing method"),
        ({"min_margin": -0.1}, "min_margin must be ≥ 0"),
        ({"min_margin": float("inf")}, "finite"),
        ({"method": "outside_in", "band": (0.2, 0.8)}, "band is for method='uncertain'"),
        ({"method": "uncertain", "band": (0.8, 0.2)}, "lo ≤ hi"),
        ({"method": "uncertain", "band": "middle"}, "pair of numbers"),
    ],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        build_pairs(CANDIDATES, **kwargs)
