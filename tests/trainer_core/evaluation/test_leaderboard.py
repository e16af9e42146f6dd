"""Leaderboards: ordering, rank bounds and tie groups on constructed data whose pairwise tests
are known, the correction across the matrix, orientation of effects, determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from trainer_core.errors import InputError
from trainer_core.evaluation.leaderboard import Entry, build_leaderboard
from trainer_core.evaluation.stats import EpisodeRecord, wilson_interval


def _success_entry(key: str, solved: set[int], tasks: int = 40, **extra) -> Entry:
    episodes = [EpisodeRecord(f"t{i}", i in solved, **extra) for i in range(tasks)]
    return Entry(key, key.upper(), episodes)


def _columns(board, *names):
    return [tuple(getattr(r, n) for n in names) for r in board.rows]


def test_three_separated_policies_get_their_own_rank_and_group():
    entries = [
        _success_entry("mid", set(range(20))),
        _success_entry("low", set()),
        _success_entry("top", set(range(40))),
    ]
    board = build_leaderboard(entries)
    assert [r.key for r in board.rows] == ["top", "mid", "low"]
    assert _columns(board, "rank", "rank_upper", "rank_lower", "tie_group") == [
        (1, 1, 1, 1),
        (2, 2, 2, 2),
        (3, 3, 3, 3),
    ]
    assert all(r.significant for r in board.matrix.values())
    mid = board.rows[1]
    assert (mid.score, mid.n, mid.tasks, mid.label) == (0.5, 40, 40, "MID")
    assert (mid.low, mid.high) == pytest.approx(wilson_interval(20, 40))


def test_two_identical_top_policies_tie_and_the_bad_one_is_third():
    solved = set(range(36))
    entries = [
        _success_entry("b", solved),
        _success_entry("bad", set(range(4))),
        _success_entry("a", solved),
    ]
    board = build_leaderboard(entries)
    assert [r.key for r in board.rows] == ["a", "b", "bad"]  # equal scores: by key
    assert _columns(board, "rank", "rank_upper", "rank_lower", "tie_group") == [
        (1, 1, 2, 1),
        (1, 1, 2, 1),
        (3, 3, 3, 2),
    ]
    tie = board.matrix[("a", "b")]
    assert tie.p_value == 1.0 and tie.significant is False


def _overlap_entries() -> list[Entry]:
    # 60 tasks, one sample each. top-vs-mid: 10 vs 5 discordant tasks (p = 0.30);
    # mid-vs-low: 15 vs 5 (p = 0.041, 0.083 after Holm); top-vs-low: 20 vs 5 (p = 0.0041).
    top = set(range(40))
    mid = set(range(30)) | set(range(40, 45))
    low = set(range(20)) | set(range(45, 50))
    return [_success_entry(k, s, tasks=60) for k, s in [("top", top), ("mid", mid), ("low", low)]]


def test_rank_bounds_when_significance_is_not_transitive():
    board = build_leaderboard(_overlap_entries())
    p = {pair: r.p_value for pair, r in board.matrix.items()}
    assert p[("top", "mid")] == pytest.approx(stats.binomtest(10, 15).pvalue)
    assert p[("mid", "low")] == pytest.approx(stats.binomtest(15, 20).pvalue)
    assert p[("top", "low")] == pytest.approx(stats.binomtest(20, 25).pvalue)
    assert [r.significant for r in board.matrix.values()] == [False, True, False]
    # top: nothing better (rank 1), low is worse, so at worst 2nd; mid: nothing significantly
    # better or worse (1..3); low: only top is better (rank 2), at worst 3rd.
    assert _columns(board, "key", "rank", "rank_upper", "rank_lower", "tie_group") == [
        ("top", 1, 1, 2, 1),
        ("mid", 1, 1, 3, 1),
        ("low", 2, 2, 3, 2),
    ]


def test_correction_runs_across_the_whole_matrix():
    holm = build_leaderboard(_overlap_entries())
    raw = build_leaderboard(_overlap_entries(), correction="none")
    assert holm.matrix[("mid", "low")].p_adjusted == pytest.approx(
        2 * holm.matrix[("mid", "low")].p_value
    )
    assert holm.matrix[("top", "low")].p_adjusted == pytest.approx(
        3 * holm.matrix[("top", "low")].p_value
    )
    assert raw.matrix[("mid", "low")].significant is True  # 0.041 uncorrected
    assert [r.rank for r in raw.rows] == [1, 1, 3]
    bonferroni = build_leaderboard(_overlap_entries(), correction="bonferroni", alpha=0.01)
    assert [r.rank for r in bonferroni.rows] == [1, 1, 1]
    assert [r.tie_group for r in bonferroni.rows] == [1, 1, 1]


def _reward_entry(key: str, mean: float, rng: np.random.Generator, samples: int = 2) -> Entry:
    base = np.linspace(0.0, 0.3, 30)  # task difficulty, shared by every policy: pairs matter
    episodes = [
        EpisodeRecord(f"t{t}", bool(mean > 0.5), reward=float(mean + base[t] + rng.normal(0, 0.05)),
                      steps=3, tokens=50 * (s + 1), cost=0.002)
        for t in range(30)
        for s in range(samples)
    ]  # fmt: skip
    return Entry(key, key, episodes)


def test_reward_leaderboard_orients_effects_and_is_deterministic():
    rng = np.random.default_rng(0)
    entries = [_reward_entry(k, m, rng) for k, m in [("b", 0.4), ("c", 0.2), ("a", 0.6)]]
    board = build_leaderboard(entries, metric="reward", seed=4)
    assert [r.key for r in board.rows] == ["a", "b", "c"]
    assert [(r.rank, r.rank_lower, r.tie_group) for r in board.rows] == [
        (1, 1, 1),
        (2, 2, 2),
        (3, 3, 3),
    ]
    top = board.rows[0]
    assert top.mean_reward == pytest.approx(top.score) and top.low < top.score < top.high
    assert (top.n, top.tasks, top.mean_steps, top.mean_tokens) == (60, 30, 3.0, 75.0)
    assert top.mean_cost == pytest.approx(0.002)
    ab = board.matrix[("a", "b")]
    assert ab.effect == pytest.approx(0.2, abs=0.03) and ab.low > 0 and "bootstrap" in ab.name
    assert board.pair("b", "a").effect == pytest.approx(-ab.effect)
    assert board.pair("b", "a").low == pytest.approx(-ab.high)
    again = build_leaderboard(entries, metric="reward", seed=4)
    assert json.dumps(again.as_dict()) == json.dumps(board.as_dict())
    assert board.as_dict()["matrix"][0]["first"] == "a"


def test_significance_follows_the_paired_test_not_the_overall_score():
    # x scores higher overall thanks to 60 easy tasks only it ran (y fails its 60 own tasks),
    # but on the 40 shared tasks y solves 30 and x only 5 of those: y is significantly better.
    x = Entry("x", "X", [EpisodeRecord(f"t{i}", i < 5 or i >= 40) for i in range(100)])
    y = Entry("y", "Y", [EpisodeRecord(f"t{i}", i < 30) for i in [*range(40), *range(100, 160)]])
    board = build_leaderboard([y, x])
    assert [r.key for r in board.rows] == ["x", "y"]
    xy = board.matrix[("x", "y")]
    assert xy.significant is True and xy.effect == pytest.approx(-25 / 40) and xy.n == 40
    assert _columns(board, "rank", "rank_lower", "tie_group") == [(2, 2, 1), (1, 1, 2)]


def test_entries_without_shared_tasks_are_not_compared():
    left = Entry("x", "X", [EpisodeRecord("t1", True), EpisodeRecord("t2", True)])
    right = Entry("y", "Y", [EpisodeRecord("t3", False), EpisodeRecord("t4", False)])
    board = build_leaderboard([left, right])
    assert board.matrix[("x", "y")].p_value is None and board.notes
    assert [(r.rank, r.rank_lower, r.tie_group) for r in board.rows] == [(1, 2, 1), (1, 2, 1)]


def test_single_entry_and_input_errors():
    board = build_leaderboard([_success_entry("only", {1})])
    assert (board.rows[0].rank, board.rows[0].rank_lower, board.rows[0].tie_group) == (1, 1, 1)
    assert board.matrix == {}
    assert build_leaderboard([]).rows == []
    with pytest.raises(InputError, match="unique"):
        build_leaderboard([_success_entry("a", set()), _success_entry("a", {1})])
    with pytest.raises(InputError, match="no episodes"):
        build_leaderboard([Entry("a", "A", [])])
    with pytest.raises(InputError, match="reward"):
        build_leaderboard([_success_entry("a", {1})], metric="reward")
    with pytest.raises(InputError):
        build_leaderboard([_success_entry("a", {1})], correction="fdr")
