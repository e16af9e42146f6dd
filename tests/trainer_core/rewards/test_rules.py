"""The rule layer on crafted step sequences, with exact expected values."""

from __future__ import annotations

import pytest

from trainer_core.envs.profiles import OutcomeSpec, get_profile
from trainer_core.recording.schema import Outcome as RecordedOutcome
from trainer_core.recording.schema import Step
from trainer_core.rewards.rules import (
    RuleContext,
    efficiency,
    infer_category,
    outcome_score,
    step_rule_scores,
)
from trainer_core.tasks.checkers import Outcome as CheckedOutcome

CODING = RuleContext.from_profile(get_profile("coding"))
BROWSER = RuleContext.from_profile(get_profile("browser"))
NO_PROFILE = RuleContext.from_profile(None)


def s(tool: str, obs: str = "", **params) -> dict:
    return {"tool": tool, "params": params, "observation": obs}


def column(steps, rule, ctx=CODING):
    return [scores[rule] for scores in step_rule_scores(steps, ctx)]


# --- redundancy --------------------------------------------------------------------------------

REDUNDANCY_CASES = [
    pytest.param(
        [s("read_file", "x = 1", file_path="a.py"), s("read_file", "x = 1", file_path="a.py")],
        [1.0, 0.0],
        id="exact-repeat-of-a-read-is-0",
    ),
    pytest.param(
        [s("bash", "a.py", command="ls"), s("bash", "a.py", command="ls")],
        [1.0, 0.3],
        id="exact-repeat-of-an-execute-is-0.3",
    ),
    pytest.param(
        [s("think", thought="plan"), s("think", thought="plan")],
        [1.0, 0.3],
        id="exact-repeat-of-a-think-is-0.3",
    ),
    pytest.param(
        [
            s("read_file", "1 x", file_path="a.py"),
            s("read_file", "40 y", file_path="a.py", start_line=40),
        ],
        [1.0, 0.0],
        id="same-file-other-params-no-write-since-is-0",
    ),
    pytest.param(
        [
            s("read_file", "x = 1", file_path="a.py"),
            s("edit_file", "ok", file_path="a.py", old_string="x = 1", new_string="x = 2"),
            s("read_file", "x = 2", file_path="a.py"),
        ],
        [1.0, 1.0, 1.0],
        id="read-after-a-write-to-it-is-1",
    ),
    pytest.param(
        [
            s("read_file", "x = 1", file_path="a.py"),
            s("edit_file", "ok", file_path="b.py", old_string="y = 1", new_string="y = 2"),
            s("read_file", "x = 1", file_path="a.py"),
        ],
        [1.0, 1.0, 0.0],
        id="read-after-a-write-to-another-file-is-0",
    ),
    pytest.param(
        [
            s("read_file", "x", file_path="a.py"),
            s("edit_file", "ok", file_path="a.py", old_string="x", new_string="y"),
            s("read_file", "y", file_path="a.py", start_line=2),
            s("read_file", "y", file_path="a.py"),
        ],
        [1.0, 1.0, 1.0, 0.0],
        id="exact-repeat-after-write-but-read-again-since-is-0",
    ),
    pytest.param(
        [s("read_file", "x", file_path="./src/a.py"), s("read_file", "x", file_path="src/a.py")],
        [1.0, 0.0],
        id="paths-compared-without-leading-dot-slash",
    ),
    pytest.param(
        [s("grep", "src/a.py:1: foo", pattern="foo", path="src")] * 2,
        [1.0, 0.0],
        id="exact-repeat-of-a-search-is-0",
    ),
    pytest.param(
        [
            s("grep", "src/a.py:1: foo", pattern="foo", path="src"),
            s("grep", "src/a.py:1: bar", pattern="bar", path="src"),
        ],
        [1.0, 1.0],
        id="search-with-other-params-is-1",
    ),
    pytest.param(
        [
            s("grep", "src/a.py:1: foo", pattern="foo", path="src"),
            s("write_file", "ok", file_path="src/pkg/b.py", content="foo = 1"),
            s("grep", "src/a.py:1: foo", pattern="foo", path="src"),
        ],
        [1.0, 1.0, 1.0],
        id="search-repeat-after-a-write-under-its-directory-is-1",
    ),
    pytest.param(
        [
            s("grep", "lib/a.py:1: foo", pattern="foo", path="lib"),
            s("write_file", "ok", file_path="src/b.py", content="foo = 1"),
            s("grep", "lib/a.py:1: foo", pattern="foo", path="lib"),
        ],
        [1.0, 1.0, 0.0],
        id="search-repeat-after-a-write-elsewhere-is-0",
    ),
    pytest.param(
        [
            s("list_dir", "a.py", path="src"),
            s("write_file", "ok", file_path="src/new.py", content="z = 1"),
            s("list_dir", "a.py new.py", path="src/"),
        ],
        [1.0, 1.0, 1.0],
        id="listing-a-directory-after-a-write-inside-it-is-1",
    ),
    pytest.param(
        [
            s("grep", "a.py:1: foo", pattern="foo"),
            s("bash", "done", command="python gen.py"),
            s("grep", "a.py:1: foo", pattern="foo"),
        ],
        [1.0, 1.0, 1.0],
        id="untargeted-search-after-an-execute-is-1",
    ),
    pytest.param(
        [
            s("bash", "ok", command="make"),
            s("bash", "ok", command="ls"),
            s("bash", "ok", command="make"),
        ],
        [1.0, 1.0, 0.3],
        id="execute-repeat-with-only-execute-between-is-0.3",
    ),
    pytest.param(
        [s("git", "On branch main", args=["status"]), s("git", "On branch main", args=["status"])],
        [1.0, 0.3],
        id="unhashable-params-still-compared",
    ),
    pytest.param(
        [
            s("str_replace_editor", "1 x", command="view", path="a.py"),
            s("str_replace_editor", "1 x", command="view", path="a.py"),
        ],
        [1.0, 0.0],
        id="editor-view-command-is-a-read",
    ),
]


@pytest.mark.parametrize(("steps", "expected"), REDUNDANCY_CASES)
def test_redundancy(steps, expected):
    assert column(steps, "redundancy") == expected


def test_tests_rerun_after_an_edit_is_not_redundant_unlike_knowlyr():
    """knowlyr-reward scores any repeated non-read call 0.3; running the tests again after an
    edit is what a good agent does, so here it scores 1.0."""
    steps = [
        s("bash", "FAILED tests/test_a.py::test_x", command="pytest -q"),
        s(
            "edit_file",
            "ok",
            file_path="src/a.py",
            old_string="return x",
            new_string="return x + 1",
        ),
        s("bash", "1 passed", command="pytest -q"),
    ]
    assert column(steps, "redundancy") == [1.0, 1.0, 1.0]


def test_aliases_are_the_same_tool():
    # Read and cat are aliases of read_file in the coding profile
    exact = [s("Read", "x", file_path="a.py"), s("cat", "x", file_path="a.py")]
    assert column(exact, "redundancy") == [1.0, 0.0]
    steps = [s("read_file", "x", file_path="a.py"), s("Read", "x", file_path="a.py", start_line=3)]
    assert column(steps, "redundancy") == [1.0, 0.0]
    # Bash and shell are aliases of bash: an exact repeat across them
    assert column([s("Bash", command="ls"), s("shell", command="ls")], "redundancy") == [1.0, 0.3]


def test_browser_element_reads_change_with_clicks():
    steps = [
        s("extract_text", "Total: 3", element_id="cart"),
        s("click", "clicked", element_id="add"),
        s("extract_text", "Total: 4", element_id="cart"),
        s("extract_text", "Total: 4", element_id="cart"),
    ]
    assert column(steps, "redundancy", BROWSER) == [1.0, 1.0, 1.0, 0.0]


def test_step_objects_and_dicts_score_the_same():
    dicts = [
        s("read_file", "def load_config(): ...", file_path="a.py"),
        s("edit_file", "ok", file_path="a.py", old_string="load_config", new_string="load"),
        s("read_file", "def load(): ...", file_path="a.py"),
        s("bash", "ok", command="pytest"),
        s("bash", "ok", command="pytest"),
    ]
    steps = [Step(index=i, **d) for i, d in enumerate(dicts)]
    assert step_rule_scores(steps, CODING) == step_rule_scores(dicts, CODING)


def test_reasons_explain_each_score_below_one():
    reasons: list[dict[str, str]] = []
    steps = [
        s("read_file", "x", file_path="a.py"),
        s("read_file", "x", file_path="a.py"),
        s("edit_file", "ok", file_path="a.py", old_string="x", new_string="y"),
        s("edit_file", "ok", file_path="a.py", old_string="y", new_string="x"),
    ]
    step_rule_scores(steps, CODING, reasons=reasons)
    assert reasons[0] == {}
    assert reasons[1] == {"redundancy": "repeats step 0 with nothing changed since"}
    assert reasons[3]["regression"] == "undoes an earlier write to 'a.py'"


# --- regression --------------------------------------------------------------------------------

REGRESSION_CASES = [
    pytest.param(
        [
            s("edit_file", file_path="a.py", old_string="x = 1", new_string="x = 2"),
            s("edit_file", file_path="a.py", old_string="x = 2", new_string="x = 1"),
        ],
        [1.0, 0.0],
        id="swapped-edit-undoes",
    ),
    pytest.param(
        [
            s("edit_file", file_path="a.py", old_string="x = 1", new_string="x = 2"),
            s("edit_file", file_path="b.py", old_string="x = 2", new_string="x = 1"),
        ],
        [1.0, 1.0],
        id="swapped-edit-on-another-file-does-not",
    ),
    pytest.param(
        [
            s("edit_file", file_path="a.py", old_string="x = 1", new_string="x = 2"),
            s("edit_file", file_path="a.py", old_string="y = 1", new_string="y = 2"),
            s("str_replace", path="a.py", old_str="x = 2", new_str="x = 1"),
        ],
        [1.0, 1.0, 0.0],
        id="undoing-an-older-edit-with-other-param-names",
    ),
    pytest.param(
        [
            s("write_file", file_path="a.py", content="v1"),
            s("write_file", file_path="a.py", content="v2"),
            s("write_file", file_path="a.py", content="v1"),
        ],
        [1.0, 1.0, 0.0],
        id="full-write-back-to-the-content-before-the-previous-write",
    ),
    pytest.param(
        [
            s("write_file", file_path="a.py", content="x = 1\ny = 1\n"),
            s("edit_file", file_path="a.py", old_string="x = 1", new_string="x = 2"),
            s("write_file", file_path="a.py", content="x = 1\ny = 1\n"),
        ],
        [1.0, 1.0, 0.0],
        id="full-write-undoing-an-edit",
    ),
    pytest.param(
        [
            s("write_file", file_path="a.py", content="v1"),
            s("write_file", file_path="a.py", content="v2"),
            s("write_file", file_path="a.py", content="v3"),
        ],
        [1.0, 1.0, 1.0],
        id="new-content-each-time",
    ),
    pytest.param(
        [
            s("str_replace_editor", command="str_replace", path="a.py", old_str="a", new_str="b"),
            s("str_replace_editor", command="undo_edit", path="a.py"),
        ],
        [1.0, 0.0],
        id="editor-undo-edit",
    ),
    pytest.param(
        [s("str_replace_editor", command="undo_edit", path="a.py")],
        [1.0],
        id="undo-edit-with-nothing-written-before",
    ),
]


@pytest.mark.parametrize(("steps", "expected"), REGRESSION_CASES)
def test_regression(steps, expected):
    assert column(steps, "regression") == expected


def test_non_redundancy_is_the_minimum_of_redundancy_and_regression():
    steps = [
        s("edit_file", file_path="a.py", old_string="x = 1", new_string="x = 2"),
        s("edit_file", file_path="a.py", old_string="x = 2", new_string="x = 1"),
        s("edit_file", file_path="a.py", old_string="x = 1", new_string="x = 2"),
    ]
    scores = step_rule_scores(steps, CODING)
    # the third is an exact repeat of the first (0.3) and undoes the second (0.0)
    assert [(x["redundancy"], x["regression"], x["non_redundancy"]) for x in scores] == [
        (1.0, 1.0, 1.0),
        (1.0, 0.0, 0.0),
        (0.3, 0.0, 0.0),
    ]


# --- information use ---------------------------------------------------------------------------

INFO_CASES = [
    pytest.param(
        [
            s("grep", "src/app/loader.py:12: def load_config(path):", pattern="load_config"),
            s("edit_file", file_path="src/app/loader.py", old_string="a", new_string="b"),
        ],
        [1.0, 1.0],
        id="write-on-a-path-seen-before",
    ),
    pytest.param(
        [
            s("grep", "/work/src/app/loader.py:12: x", pattern="x"),
            s("edit_file", file_path="src/app/loader.py", old_string="a", new_string="b"),
        ],
        [1.0, 1.0],
        id="absolute-path-seen-relative-used",
    ),
    pytest.param(
        [
            s("bash", "E AttributeError: no attribute 'parse_file'", command="pytest"),
            s(
                "edit_file",
                file_path="x.txt",
                old_string="def parse(",
                new_string="def parse_file(",
            ),
        ],
        [1.0, 1.0],
        id="identifier-seen-in-an-error",
    ),
    pytest.param(
        [
            s("read_file", "class ConfigLoader:\n    pass", file_path="a.py"),
            s("write_file", file_path="b.py", content="from a import ConfigLoader"),
        ],
        [1.0, 1.0],
        id="camel-case-identifier",
    ),
    pytest.param(
        [
            s("read_file", "see notes in docs/setup.md.", file_path="README"),
            s("write_file", file_path="docs/setup.md", content="hello"),
        ],
        [1.0, 1.0],
        id="path-at-the-end-of-a-sentence",
    ),
    pytest.param(
        [
            s("read_file", "def load_file(self): ...", file_path="a.py"),
            s("write_file", file_path="z.txt", content="self.load_file()"),
        ],
        [1.0, 1.0],
        id="dotted-name-uses-its-tail",
    ),
    pytest.param(
        [
            s("grep", "src/app/loader.py:12: def load_config(path):", pattern="load_config"),
            s("write_file", file_path="notes.txt", content="hello world"),
        ],
        [1.0, 0.7],
        id="write-using-nothing-seen",
    ),
    pytest.param(
        [
            s("grep", "src/app/loader.py:12: def load_config(path):", pattern="load_config"),
            s("bash", "ok", command="make all"),
        ],
        [1.0, 0.7],
        id="execute-using-nothing-seen",
    ),
    pytest.param(
        [s("write_file", "ok", file_path="notes.txt", content="hello")],
        [1.0],
        id="first-step",
    ),
    pytest.param(
        [
            s("bash", "src/app/loader.py", command="ls -R"),
            s("read_file", "x", file_path="unrelated.txt"),
            s("grep", "", pattern="zzz"),
        ],
        [1.0, 1.0, 1.0],
        id="reads-and-searches-always-1",
    ),
    pytest.param(
        [
            s("bash", "ok done", command="ls"),
            s("write_file", file_path="notes.txt", content="hello"),
        ],
        [1.0, 1.0],
        id="nothing-informative-seen-yet",
    ),
    pytest.param(
        [
            s("write_file", "ok", file_path="notes.txt", content="hello"),
            s(
                "edit_file",
                "see load_config",
                file_path="notes.txt",
                old_string="a",
                new_string="b",
            ),
        ],
        [1.0, 1.0],
        id="own-observation-does-not-count-for-the-step-itself",
    ),
]


@pytest.mark.parametrize(("steps", "expected"), INFO_CASES)
def test_info_use(steps, expected):
    assert column(steps, "info_use") == expected


def test_info_use_in_the_browser():
    steps = [
        s("extract_text", '<button id="add-to-cart">Add</button>', element_id="main"),
        s("click", "clicked", element_id="add-to-cart"),
        s("click", "clicked", element_id="checkout"),
    ]
    assert column(steps, "info_use", BROWSER) == [1.0, 1.0, 0.7]


def test_info_use_reads_only_the_head_and_tail_of_a_huge_observation():
    middle = "x " * 20_000 + "hidden_name " + "y " * 20_000
    steps = [
        s("bash", "head_name " + middle + " tail_name", command="cat big.log"),
        s("write_file", file_path="out.txt", content="hidden_name"),
        s("write_file", file_path="out.txt", content="tail_name"),
    ]
    assert column(steps, "info_use") == [1.0, 0.7, 1.0]


# --- categories for tools the profile does not know --------------------------------------------


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("read_file", "read"),
        ("cat", "read"),
        ("Read", "read"),
        ("view_source", "read"),
        ("grep", "search"),
        ("search_code", "search"),
        ("find", "search"),
        ("Glob", "search"),
        ("edit", "write"),
        ("str_replace", "write"),
        ("MultiEdit", "write"),
        ("write_to_file", "write"),
        ("bash", "execute"),
        ("execute_bash", "execute"),
        ("python", "execute"),
        ("run_tests", "execute"),
        ("submit", "submit"),
        ("finish", "submit"),
        ("TodoWrite", "think"),
        ("navigate", "navigate"),
        ("frobnicate", "execute"),
    ],
)
def test_infer_category(name, category):
    assert infer_category(name) == category


def test_unknown_tools_get_inferred_rules():
    steps = [
        s("ReadFile", "x", path="a.py"),
        s("read", "x", path="a.py", offset=10),
        s("run_shell", "ok", cmd="ls"),
        s("run_shell", "ok", cmd="ls"),
    ]
    assert column(steps, "redundancy", NO_PROFILE) == [1.0, 0.0, 1.0, 0.3]


# --- efficiency and outcome --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "reference", "expected"),
    [
        (5, 5, 1.0),
        (10, 5, 0.5),
        (8, 2, 0.25),
        (3, 5, 1.0),
        (5, None, None),
        (5, 0, None),
        (0, 3, 0.0),
    ],
)
def test_efficiency(steps, reference, expected):
    assert efficiency(steps, reference) == expected


CODING_SPEC = get_profile("coding").outcome


@pytest.mark.parametrize(
    ("outcome", "spec", "expected"),
    [
        pytest.param(
            RecordedOutcome(success=True, partial_credit=0.25), None, 0.25, id="partial-first"
        ),
        pytest.param({"partial_credit": 1.5}, None, 1.0, id="partial-clamped"),
        pytest.param(
            {"tests_passed": 3, "tests_total": 4, "success": False}, None, 0.75, id="knowlyr-fields"
        ),
        pytest.param(
            RecordedOutcome(success=False, tests_passed=3, tests_failed=1),
            CODING_SPEC,
            0.75,
            id="total-from-passed-plus-failed",
        ),
        pytest.param(
            RecordedOutcome(tests_passed=4, metadata={"tests_total": 5}),
            CODING_SPEC,
            0.8,
            id="total-from-metadata",
        ),
        pytest.param(
            {"points": 3, "max_points": 12, "success": True},
            OutcomeSpec(score_field="points", total_field="max_points"),
            0.25,
            id="custom-score-and-total",
        ),
        pytest.param(RecordedOutcome(score=0.6, success=False), None, 0.6, id="own-score"),
        pytest.param(RecordedOutcome(success=True), CODING_SPEC, 1.0, id="success"),
        pytest.param(RecordedOutcome(success=False), None, 0.0, id="failure"),
        pytest.param(
            {"solved": True}, OutcomeSpec(success_field="solved"), 1.0, id="custom-success"
        ),
        pytest.param(
            CheckedOutcome(success=True, partial_credit=0.5), None, 0.5, id="checker-outcome"
        ),
        pytest.param(RecordedOutcome(), CODING_SPEC, None, id="unknown"),
        pytest.param(None, None, None, id="none"),
    ],
)
def test_outcome_score(outcome, spec, expected):
    assert outcome_score(outcome, spec) == expected
