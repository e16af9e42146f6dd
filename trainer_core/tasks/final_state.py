"""The ``final_state`` checker (tau-bench's reward): the episode succeeds when the environment's
final database equals the task's expected one and the agent told the user every required output.

``run_result`` (given by the environment at episode end)::

    {"database": <the final database>, "said": [<every message the agent sent the user>]}

The expected state (:func:`expected_state`) is ``task.metadata["expected_database"]``, or the
task's initial ``metadata["database"]`` with ``metadata["expected_changes"]`` applied — a list of
``{"path": [key, ...], "value": ...}``, each setting the value at a path of keys (what
:func:`changes` finds between two states; the built-in tasks store this, half the size). The
final database is compared with it whole, after a JSON round trip so that tuples and lists
compare alike;
``task.metadata["required_outputs"]`` the strings that must appear in what the agent said (case
and commas ignored, as tau-bench does). The outcome's detail names the first differences;
``metadata["differences"]`` lists them and ``metadata["outputs"]`` says which outputs were found.
A task without an expected database is checked on its outputs alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trainer_core.tasks.model import Task


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def differences(final: Any, expected: Any, path: str = "", limit: int = 8) -> list[str]:
    """Where ``final`` differs from ``expected`` (``path: got X, expected Y``), at most
    ``limit``, in key order."""
    out: list[str] = []
    if isinstance(final, Mapping) and isinstance(expected, Mapping):
        for key in sorted(set(final) | set(expected), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in final:
                out.append(f"{where}: missing")
            elif key not in expected:
                out.append(f"{where}: not expected")
            else:
                out += differences(final[key], expected[key], where, limit - len(out))
            if len(out) >= limit:
                break
    elif final != expected:
        got, want = json.dumps(final)[:80], json.dumps(expected)[:80]
        out.append(f"{path}: {got}, expected {want}")
    return out[:limit]


def changes(before: Any, after: Any, path: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The ``{"path", "value"}`` settings that turn ``before`` into ``after`` (mappings are
    followed key by key; any other value is set whole). A key ``after`` lacks cannot be said
    this way: ValueError."""
    if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
        return [] if before == after else [{"path": list(path), "value": after}]
    if set(before) - set(after):
        raise ValueError(f"keys removed at {'.'.join(path) or 'the top'}: not a change list")
    out: list[dict[str, Any]] = []
    for key in after:
        if key in before:
            out += changes(before[key], after[key], (*path, str(key)))
        else:
            out.append({"path": [*path, str(key)], "value": after[key]})
    return out


def expected_state(task: Task) -> Any:
    """The state the task expects (see the module docstring); None when it names none."""
    meta = task.metadata or {}
    if meta.get("expected_database") is not None:
        return meta["expected_database"]
    if meta.get("expected_changes") is None or not isinstance(meta.get("database"), Mapping):
        return None
    state = _plain(meta["database"])
    for change in meta["expected_changes"]:
        *parents, last = change["path"]
        target = state
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = change["value"]
    return state


def _said(text: str) -> str:
    return text.lower().replace(",", "")


def final_state(task: Task, run_result: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of the ``final_state`` checker's Outcome (the checkers module wraps them):
    success iff the final database is the expected one and every required output was said."""
    meta = task.metadata or {}
    if not run_result or "database" not in run_result:
        return {"success": False, "score": 0.0, "detail": "no final state was given to the checker"}
    expected = expected_state(task)
    found = []
    if expected is not None:
        found = differences(_plain(run_result["database"]), _plain(expected))
    said = [_said(str(s)) for s in run_result.get("said") or []]
    outputs = {
        str(o): any(_said(str(o)) in s for s in said) for o in meta.get("required_outputs") or []
    }
    missing = [o for o, ok in outputs.items() if not ok]
    ok = not found and not missing
    if ok:
        detail = "the final state is the expected one"
        if outputs:
            detail += f"; the user was told {', '.join(outputs)}"
    else:
        parts = []
        if found:
            parts.append(f"the final state differs: {'; '.join(found[:3])}")
        if missing:
            parts.append(f"the user was never told {', '.join(missing)}")
        detail = "; ".join(parts)
    return {
        "success": ok,
        "score": 1.0 if ok else 0.0,
        "detail": detail,
        "metadata": {"differences": found, "outputs": outputs},
    }
