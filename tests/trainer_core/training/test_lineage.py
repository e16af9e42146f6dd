"""The lineage file on its own (no model): lines appended per step, a start at step k keeps
the lines up to k (from the resumed run's own directory when it was another), a line cut short
by a killed process is left out and any other bad line named."""

from __future__ import annotations

import pytest

from trainer_core.errors import InputError
from trainer_core.training.lineage import (
    append_step,
    lineage_path,
    read_lineage,
    start_lineage,
)


def steps(output_dir) -> list[int]:
    return [entry["step"] for entry in read_lineage(output_dir)]


def test_a_run_appends_one_line_per_step_and_reads_them_back(tmp_path):
    assert read_lineage(tmp_path / "none") == []  # a run without lineage (not started, older)
    out = tmp_path / "run"
    start_lineage(out, 0)
    append_step(out, 1, ["3#0", "3#1"])
    append_step(out, 2, [7, 7], dropped=[9])
    assert read_lineage(out) == [
        {"step": 1, "consumed": ["3#0", "3#1"], "dropped": []},
        {"step": 2, "consumed": [7, 7], "dropped": [9]},
    ]
    with pytest.raises(TypeError, match="str or int"):
        append_step(out, 3, [1.5])
    with pytest.raises(TypeError, match="str or int"):
        append_step(out, 3, [True])
    assert steps(out) == [1, 2]


def test_a_start_keeps_the_lines_up_to_its_step(tmp_path):
    out = tmp_path / "run"
    for step in range(1, 6):
        append_step(out, step, [step])
    start_lineage(out, 2)  # resumed from checkpoint-2: steps 3-5 train again
    assert steps(out) == [1, 2]
    append_step(out, 3, [30])
    assert read_lineage(out)[-1] == {"step": 3, "consumed": [30], "dropped": []}
    start_lineage(out, 0)  # a new run in the same output_dir
    assert not lineage_path(out).exists() and read_lineage(out) == []


def test_a_run_resumed_into_another_directory_takes_the_source_lines(tmp_path):
    source, target = tmp_path / "part", tmp_path / "resumed"
    for step in range(1, 5):
        append_step(source, step, [step])
    append_step(target, 1, ["stale"])  # what an earlier run left there is replaced
    start_lineage(target, 2, source=source)
    assert read_lineage(target) == [
        {"step": 1, "consumed": [1], "dropped": []},
        {"step": 2, "consumed": [2], "dropped": []},
    ]
    assert steps(source) == [1, 2, 3, 4]  # the source run's lineage is left as it was
    start_lineage(source, 4, source=source)  # the same directory: nothing to copy
    assert steps(source) == [1, 2, 3, 4]


def test_a_line_cut_short_is_left_out_and_a_bad_line_is_named(tmp_path):
    out = tmp_path / "run"
    append_step(out, 1, [1])
    append_step(out, 2, [2])
    path = lineage_path(out)
    path.write_text(path.read_text() + '{"step": 3, "consu')  # killed while writing step 3
    assert steps(out) == [1, 2]
    start_lineage(out, 2)
    append_step(out, 3, [3])
    assert steps(out) == [1, 2, 3]
    path.write_text("not json\n" + path.read_text())
    with pytest.raises(InputError, match="line 1 is not JSON"):
        read_lineage(out)
    path.write_text("[1, 2]\n")
    with pytest.raises(InputError, match="not a lineage entry"):
        read_lineage(out)
