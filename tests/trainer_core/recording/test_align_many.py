"""N-way (star) step alignment of a group's samples: insertions, deletions, reorderings, the
centre choice and the caps."""

from dataclasses import dataclass, field
from typing import Any

from trainer_core.recording.align_many import MAX_SEQUENCES, align_many


@dataclass
class S:
    tool: str
    params: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    reward: float | None = None


def calc(x: str) -> S:
    return S("calculator", {"expression": x})


def submit(x: str) -> S:
    return S("submit", {"answer": x})


def table(al) -> list[list[str]]:
    """Per sequence, one token per column: the step's tool and first param value, or '-'."""
    return [
        [
            "-" if i is None else f"{seq[i].tool}:{next(iter(seq[i].params.values()), '')}"
            for i in row
        ]  # fmt: skip
        for seq, row in zip(SEQS, al.rows(), strict=True)
    ]


SEQS: list[list[S]] = []


def run(*seqs):
    SEQS[:] = [list(s) for s in seqs]
    return align_many(SEQS)


def test_identical_samples_share_every_column():
    a = [calc("1+2"), submit("3")]
    al = run(a, list(a), list(a))
    assert al.sequences == 3 and len(al.columns) == 2
    assert all(c.kind == "centre" and c.present == 3 for c in al.columns)
    assert all(set(c.relations) == {"same"} for c in al.columns)


def test_an_inserted_step_is_its_own_column_with_gaps_for_the_others():
    base = [calc("1+2"), submit("3")]
    detour = [calc("1+2 +"), calc("1+2"), submit("3")]
    al = run(base, detour, list(base))
    assert table(al) == [
        ["-", "calculator:1+2", "submit:3"],
        ["calculator:1+2 +", "calculator:1+2", "submit:3"],
        ["-", "calculator:1+2", "submit:3"],
    ]
    assert [c.kind for c in al.columns] == ["insertion", "centre", "centre"]
    assert al.columns[0].relations == ["gap", "same", "gap"]


def test_the_same_insertion_in_two_samples_is_one_column():
    base = [calc("1+2"), submit("3")]
    extra = [calc("1+2"), calc("3*1"), submit("3")]
    al = run(base, extra, list(extra), list(base), list(base))
    assert al.centre in (0, 3, 4)  # the medoid: the majority shape
    ins = [c for c in al.columns if c.kind == "insertion"]
    assert len(ins) == 1 and ins[0].cells == [None, 1, 1, None, None]
    assert ins[0].relations == ["gap", "same", "same", "gap", "gap"]


def test_unrelated_insertions_in_one_slot_get_separate_columns():
    base = [calc("1+2"), submit("3")]
    one = [calc("1+2"), S("search", {"q": "sum"}), submit("3")]
    two = [calc("1+2"), S("notes", {"text": "x"}), submit("3")]
    al = run(base, one, two, list(base))
    ins = [c for c in al.columns if c.kind == "insertion"]
    cells = [[-1 if i is None else i for i in c.cells] for c in ins]
    assert sorted(cells) == [[-1, -1, 1, -1], [-1, 1, -1, -1]]


def test_a_deleted_step_is_a_gap_in_the_centre_column():
    full = [calc("1+2"), calc("3*2"), submit("6")]
    short = [calc("1+2"), submit("6")]
    al = run(full, list(full), short)
    assert al.centre in (0, 1)
    middle = al.columns[1]
    assert middle.kind == "centre" and middle.cells == [1, 1, None]
    assert middle.relations == ["same", "same", "gap"]
    assert al.columns[2].cells == [2, 2, 1]


def test_changed_params_and_other_tools_pair_in_one_column_and_are_marked():
    a = [calc("1+2"), submit("3")]
    b = [calc("1+2"), submit("4")]
    c = [calc("1+2"), S("bash", {"cmd": "echo 3"})]
    al = run(a, b, list(a), c)
    last = al.columns[-1]
    assert last.cells == [1, 1, 1, 1]
    assert sorted(last.relations) == sorted(["same", "changed_params", "same", "different"])


def test_a_reordering_keeps_every_step_once_and_marks_the_moved_one():
    a = [calc("1+2"), S("notes", {"text": "n"}), submit("3")]
    b = [S("notes", {"text": "n"}), calc("1+2"), submit("3")]
    al = run(a, list(a), b)
    # every step of every sequence sits in exactly one column, in its own order
    for k, seq in enumerate(SEQS):
        placed = [row for row in al.rows()[k] if row is not None]
        assert placed == list(range(len(seq)))
    # the swapped steps are marked (never shown as "same"); the step after them lines up again
    swapped = [c.relations[2] for c in al.columns if c.cells[2] in (0, 1)]
    assert swapped and "same" not in swapped
    assert al.columns[-1].cells == [2, 2, 2] and set(al.columns[-1].relations) == {"same"}


def test_message_steps_pair_with_messages_of_the_same_role():
    @dataclass
    class M:
        role: str
        text: str
        kind: str = "message"
        tool: str = ""
        params: dict = field(default_factory=dict)
        observation: str = ""
        reward: float | None = None

    a = [M("assistant", "Let me add."), calc("1+2")]
    b = [M("assistant", "I add them."), calc("1+2")]
    al = align_many([a, b])
    assert al.columns[0].cells == [0, 0]
    assert sorted(al.columns[0].relations) == ["changed_text", "same"]


def test_caps_bound_the_work_and_are_reported():
    many = [[calc(str(i)), submit("x")] for i in range(MAX_SEQUENCES + 3)]
    al = align_many(many)
    assert al.sequences == MAX_SEQUENCES and al.dropped_sequences == 3 and al.truncated
    long = [calc(str(i)) for i in range(50)]
    al = align_many([long, long[:10]], max_steps=20)
    assert al.truncated and max(i for i in al.rows()[0] if i is not None) == 19
    assert align_many([]).columns == [] and align_many([[]]).columns == []
