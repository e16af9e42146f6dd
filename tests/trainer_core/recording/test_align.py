from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from trainer_core.recording.align import (
    TEXT_DIFF_BUDGET,
    AlignedRow,
    Alignment,
    DiffWork,
    align_steps,
    param_diff,
    reward_delta,
    step_similarity,
    text_diff,
)
from trainer_core.recording.schema import Step


@dataclass
class S:
    tool: str
    params: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    reward: float | None = None


def seq(n: int, prefix: str = "f") -> list[S]:
    return [S("bash", {"cmd": f"cat {prefix}{i}.py"}, f"out {i}") for i in range(n)]


def kinds(al: Alignment) -> list[str]:
    return [r.kind for r in al.rows]


def test_identical_sequences_all_same():
    left = seq(10)
    al = align_steps(left, [replace(s) for s in left])
    assert kinds(al) == ["same"] * 10
    assert [(r.left_index, r.right_index) for r in al.rows] == [(i, i) for i in range(10)]
    assert al.first_divergence is None
    assert al.identical


def test_one_inserted_step_is_a_single_gap():
    left = seq(10)
    right = left[:5] + [S("bash", {"cmd": "ls -la"}, "x")] + left[5:]
    al = align_steps(left, right)
    assert kinds(al).count("right_only") == 1
    assert kinds(al).count("same") == 10
    assert len(al.rows) == 11
    assert al.rows[5] == AlignedRow(None, 5, "right_only")
    assert al.first_divergence == 5
    assert al.rows[6] == AlignedRow(5, 6, "same")


def test_one_deleted_step_different_tool():
    left = seq(6)
    left.insert(3, S("edit", {"path": "a.py"}))
    right = seq(6)
    al = align_steps(left, right)
    assert kinds(al) == ["same"] * 3 + ["left_only"] + ["same"] * 3
    assert al.rows[3] == AlignedRow(3, None, "left_only")


def test_changed_param():
    left = seq(8)
    right = [replace(s) for s in left]
    right[4] = replace(right[4], params={"cmd": "cat f4.txt"})
    al = align_steps(left, right)
    assert kinds(al) == ["same"] * 4 + ["changed_params"] + ["same"] * 3
    assert al.rows[4] == AlignedRow(4, 4, "changed_params")
    assert al.first_divergence == 4


def test_changed_observation():
    left = seq(5)
    right = [replace(s) for s in left]
    right[2] = replace(right[2], observation="something else")
    al = align_steps(left, right)
    assert kinds(al) == ["same", "same", "changed_observation", "same", "same"]
    assert al.first_divergence == 2


def test_completely_different_tools():
    left = [S("bash", {"cmd": "ls"}), S("bash", {"cmd": "pwd"}), S("bash", {"cmd": "id"})]
    right = [S("edit", {"path": "a"}), S("submit"), S("browse", {"url": "x"})]
    al = align_steps(left, right)
    assert set(kinds(al)) <= {"different", "left_only", "right_only"}
    assert al.first_divergence == 0
    assert sorted(r.left_index for r in al.rows if r.left_index is not None) == [0, 1, 2]
    assert sorted(r.right_index for r in al.rows if r.right_index is not None) == [0, 1, 2]
    assert kinds(al) == ["different"] * 3


def test_different_lengths_different_tools_uses_gaps():
    al = align_steps([S("a")], [S("b"), S("c"), S("d")])
    assert kinds(al).count("different") == 1
    assert kinds(al).count("right_only") == 2


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ([], [], []),
        ([S("a"), S("b")], [], ["left_only", "left_only"]),
        ([], [S("a")], ["right_only"]),
    ],
)
def test_empty_inputs(left, right, expected):
    al = align_steps(left, right)
    assert kinds(al) == expected
    assert al.first_divergence == (0 if expected else None)


def test_works_with_pydantic_steps():
    left = [Step(index=i, tool="bash", params={"cmd": f"echo {i}"}) for i in range(4)]
    right = [s.model_copy() for s in left]
    right[1] = right[1].model_copy(update={"observation": "different"})
    assert kinds(align_steps(left, right)) == ["same", "changed_observation", "same", "same"]


def test_step_similarity_scoring():
    a = S("bash", {"cmd": "ls", "cwd": "/a"})
    assert step_similarity(a, S("bash", {"cwd": "/a", "cmd": "ls"})) == 1.0
    assert step_similarity(a, S("edit", {"cmd": "ls", "cwd": "/a"})) == 0.0
    close = step_similarity(a, S("bash", {"cmd": "ls -l", "cwd": "/a"}))
    far = step_similarity(a, S("bash", {"other": 1}))
    assert far == pytest.approx(0.5)
    assert 0.5 < close < 0.9


def test_param_diff():
    left = {"cmd": "ls", "cwd": "/a", "timeout": 5}
    right = {"cmd": "ls", "cwd": "/b", "env": {"X": "1"}}
    assert param_diff(left, right) == [
        ("cwd", "/a", "/b"),
        ("env", None, {"X": "1"}),
        ("timeout", 5, None),
    ]
    assert param_diff(left, dict(left)) == []
    assert param_diff(None, {"a": 1}) == [("a", None, 1)]


def test_text_diff():
    a = "the quick brown fox jumps"
    b = "the slow brown fox leaps high"
    ops = text_diff(a, b)
    assert ops == [
        ("equal", "the "),
        ("delete", "quick"),
        ("insert", "slow"),
        ("equal", " brown fox "),
        ("delete", "jumps"),
        ("insert", "leaps high"),
    ]
    assert "".join(t for op, t in ops if op != "insert") == a
    assert "".join(t for op, t in ops if op != "delete") == b
    assert text_diff("same text", "same text") == [("equal", "same text")]
    assert text_diff("", "") == []
    assert text_diff(None, "new") == [("insert", "new")]


def test_reward_delta():
    assert reward_delta(S("a", reward=0.25), S("a", reward=1.0)) == pytest.approx(0.75)
    assert reward_delta(S("a"), S("a", reward=1.0)) is None
    assert reward_delta(None, S("a", reward=1.0)) is None
    assert Alignment.reward_delta(S("a", reward=1.0), S("a", reward=0.0)) == -1.0


def test_500_by_500_with_edits_aligns_correctly():
    left = seq(500)
    right = [replace(s) for s in left]
    right[100] = replace(right[100], params={"cmd": "cat g100.py"})
    right[250] = replace(right[250], observation="changed")
    del right[300]  # left 300 -> left_only
    right.insert(400, S("edit", {"path": "new.py"}))  # before left 401 -> right_only
    al = align_steps(left, right)  # speed is measured in bench/, not asserted here
    c = al.counts()
    assert c == {
        "same": 497,
        "changed_observation": 1,
        "changed_params": 1,
        "changed_text": 0,
        "different": 0,
        "left_only": 1,
        "right_only": 1,
    }
    assert al.rows[100] == AlignedRow(100, 100, "changed_params")
    assert al.first_divergence == 100
    assert al.rows[250].kind == "changed_observation"
    assert AlignedRow(300, None, "left_only") in al.rows
    assert AlignedRow(None, 400, "right_only") in al.rows


def test_500_by_500_all_fuzzy_pairs_pair_up():
    # Worst case: same tool everywhere, every params distinct, so every in-band cell
    # needs the fuzzy similarity.
    left = seq(500, "a")
    right = seq(500, "b")
    al = align_steps(left, right)
    assert kinds(al) == ["changed_params"] * 500


# --- bounded text diff ---------------------------------------------------------------------------


def _words(rng, n: int, alphabet: str) -> str:
    text = " ".join(
        "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 7))) for _ in range(n)
    )
    return text[:n]


def _rebuilt(ops):
    left = "".join(t for op, t in ops if op in ("equal", "delete"))
    right = "".join(t for op, t in ops if op in ("equal", "insert"))
    return left, right


@pytest.mark.parametrize("size", [2_000, 4_000, 100_000])
def test_the_worst_case_diff_does_bounded_work_and_still_rebuilds_both_texts(size):
    """Two observations that share only their spaces made the old diff cubic (2 KB: seconds,
    4 KB: ~20 s of server CPU per page). The work is now capped whatever the input."""
    import random

    rng = random.Random(size)
    a, b = _words(rng, size, "abcdefghij"), _words(rng, size, "klmnopqrst")
    work = DiffWork()
    ops = text_diff(a, b, work=work)
    assert work.work <= work.budget == 2 * TEXT_DIFF_BUDGET
    assert _rebuilt(ops) == (a, b)
    tight = DiffWork()
    ops = text_diff(a, b, budget=1_000, work=tight)
    assert tight.work <= 2_000 and tight.level in ("line", "block")
    assert _rebuilt(ops) == (a, b)


def test_the_diff_is_a_shortest_edit_on_small_inputs():
    """Myers' search finds as few changed tokens as a full LCS (checked by brute force)."""
    import random
    import re

    rng = random.Random(7)
    tokens = re.compile(r"\s+|[^\s]+")
    for _ in range(400):
        a = " ".join(rng.choice("abc") for _ in range(rng.randint(0, 8)))
        b = " ".join(rng.choice("abc") for _ in range(rng.randint(0, 8)))
        ops = text_diff(a, b)
        assert _rebuilt(ops) == (a, b)
        ta, tb = tokens.findall(a), tokens.findall(b)
        lcs = [[0] * (len(tb) + 1) for _ in range(len(ta) + 1)]
        for i in range(len(ta) - 1, -1, -1):
            for j in range(len(tb) - 1, -1, -1):
                lcs[i][j] = (
                    lcs[i + 1][j + 1] + 1 if ta[i] == tb[j] else max(lcs[i + 1][j], lcs[i][j + 1])
                )
        kept = sum(len(tokens.findall(t)) for op, t in ops if op == "equal")
        assert kept == lcs[0][0], (a, b, ops)


def test_long_param_values_are_compared_in_linear_time():
    """A pair of long param values (an edit of a big file) takes the bigram proxy, not
    SequenceMatcher, so aligning steps with big params stays fast."""
    long_a = {"file_path": "x.py", "content": "a b " * 5_000}
    long_b = {"file_path": "x.py", "content": "b a " * 5_000}
    score = step_similarity(S("edit_file", long_a), S("edit_file", long_b))
    assert 0.5 <= score <= 0.9


def test_message_steps_align_by_role_and_text():
    from trainer_core.recording.schema import Step

    def msg(i, role, text):
        return Step(index=i, kind="message", role=role, text=text)

    def call(i, tool, **params):
        return Step(index=i, tool=tool, params=params)

    left = [
        msg(0, "user", "Book HAT136"),
        call(1, "search", q="HAT136"),
        msg(2, "assistant", "Booked."),
    ]
    right = [
        msg(0, "user", "Book HAT136"),
        call(1, "search", q="HAT136"),
        msg(2, "user", "Are you sure?"),
        msg(3, "assistant", "Booked, yes."),
    ]
    al = align_steps(left, right)
    assert [(r.left_index, r.right_index, r.kind) for r in al.rows] == [
        (0, 0, "same"),
        (1, 1, "same"),
        (None, 2, "right_only"),  # a user turn never pairs with the agent's reply
        (2, 3, "changed_text"),
    ]
    assert al.first_divergence == 2
    # a message never pairs as the same step as a tool call
    assert align_steps([msg(0, "assistant", "search")], [call(0, "search")]).rows[0].kind in (
        "different",
        "left_only",
    )
