"""Shared pieces of the coding suite: the task constants (environment, test command, kinds,
prompt footers) and the helpers every task module builds its tasks with: ``dedent_block``
for file contents, ``python_check`` for the reference's check command and ``coding_task``
for the Task itself (reference solution and wrong patch included)."""

from __future__ import annotations

import textwrap

from trainer_core.tasks.model import Task, ToolCall

ENVIRONMENT = "steplab/sandbox"
TEST_COMMAND = "python3 -m unittest -q"
KINDS = (
    "off_by_one",
    "wrong_condition",
    "missing_edge_case",
    "wrong_api_use",
    "missing_feature",
    "refactor_keep_behaviour",
    "mutable_default",
)
FOOTER = (
    "Work in the repository (your working directory). When you submit, hidden unit tests run "
    "with `python3 -m unittest` (Python 3.11, standard library only)."
)
REFACTOR_FOOTER = (
    "Change the code in the repository (your working directory). When you submit, hidden unit "
    "tests check both the behaviour and the new structure; they run with `python3 -m unittest` "
    "(Python 3.11, standard library only)."
)

Edit = tuple[str, str, str]  # (file_path, old_string, new_string)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def dedent_block(text: str) -> str:
    """A dedented block of file content, without the leading newline."""
    return textwrap.dedent(text).lstrip("\n")


def python_check(code: str) -> str:
    """A bash command running a short Python snippet (the snippet has no single quotes)."""
    if "'" in code:
        raise ValueError("a check snippet must not contain single quotes")
    return f"python3 -c '{dedent_block(code).strip()}'"


def _edit_calls(edits: list[Edit], thought: str | None = None) -> list[ToolCall]:
    calls = []
    for index, (path, old, new) in enumerate(edits):
        calls.append(
            ToolCall(
                tool="edit_file",
                params={"file_path": path, "old_string": old, "new_string": new},
                thought=thought if index == 0 else None,
            )
        )
    return calls


def _reference(read: str, edits: list[Edit], check: str, why: str) -> list[ToolCall]:
    """The standard solution: read the file, edit it, try it out, submit."""
    return [
        ToolCall(
            tool="read_file",
            params={"file_path": read},
            thought="Read the code the issue is about first.",
        ),
        *_edit_calls(edits, why),
        ToolCall(tool="bash", params={"command": check}, thought="Check the fix by running it."),
        ToolCall(tool="submit", params={}),
    ]


def _wrong_patch(edits: list[Edit]) -> list[dict]:
    calls = [*_edit_calls(edits), ToolCall(tool="submit", params={})]
    return [call.model_dump(exclude_none=True) for call in calls]


def coding_task(
    kind: str,
    number: int,
    *,
    title: str,
    issue: str,
    files: dict[str, str],
    hidden: dict[str, str],
    fix: list[Edit],
    check: str,
    wrong: list[Edit],
    why: str,
    read: str | None = None,
) -> Task:
    """One coding task: the repository ``files``, the ``hidden`` tests run at submit, the
    reference solution (read ``read`` or the first edited file, apply ``fix``, run ``check``,
    submit) and the ``wrong`` patch. ``files`` and ``hidden`` are copied, so a task module can
    keep them as constants."""
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}")
    footer = REFACTOR_FOOTER if kind == "refactor_keep_behaviour" else FOOTER
    reference = _reference(read or fix[0][0], fix, check, why)
    return Task(
        id=f"coding-{kind.replace('_', '-')}-{number:02d}",
        prompt=f"{title}\n\n{dedent_block(issue).strip()}\n\n{footer}",
        domain="coding",
        environment=ENVIRONMENT,
        checker="test_command",
        files=dict(files),
        test_command=TEST_COMMAND,
        reference_solution=reference,
        reference_steps=len(reference),
        metadata={
            "task_set": "coding",
            "kind": kind,
            "hidden_files": dict(hidden),
            "wrong_patch": _wrong_patch(wrong),
        },
    )
