"""N-way step alignment: the G samples of one task side by side, step against step.

:func:`align_many` generalises the trajectory diff's two-way alignment
(:func:`~trainer_core.recording.align.align_steps`, the same pair scores and gap penalty) to N
sequences by a *star alignment* (Gusfield 1993): one sequence is the **centre**, every other
sequence is aligned to it with ``align_steps``, and the pairwise alignments are merged into one
table of columns.

* The centre is the *medoid*: the sequence whose summed distance to all the others is lowest
  (ties: the lowest index), the distance of two sequences being their mean length minus their
  pairwise alignment score (pair similarities minus
  :data:`~trainer_core.recording.align.GAP_PENALTY` per gap) — 0 for equal sequences, and not
  smaller for a longer one (a raw score would favour the longest sequence). When the ``N (N − 1) / 2`` pairwise DPs would
  fill more than :data:`CENTRE_BUDGET` cells, the centre is the sequence of median length
  instead (no DP spent on choosing it).
* Each step of the centre is one **centre column**; a sequence's step paired with it sits in
  that column (same, changed or different), and a centre step with no partner leaves a gap in
  the sequence's cell (a *deletion* relative to the centre).
* A sequence's steps left unpaired between two centre steps are **insertion columns** in that
  slot. Insertions of different sequences in the same slot are merged progressively: each
  sequence's inserted run is aligned (``align_steps`` again) against the slot's columns so far
  (each represented by its first step), a paired step joins its column, an unpaired one opens a
  new column at its place. So the same extra step taken by several samples is one column, and
  unrelated extra steps are separate ones.

A reordering (``A B`` in one sample, ``B A`` in another) cannot line up in any global alignment:
the swapped steps show as two ``different`` cells (or one pairs and the other is a gap in one
column and an insertion in another — the scores tie), never as ``same``; the steps after them
line up again.

Cost, bounded: at most :data:`MAX_SEQUENCES` sequences of at most :data:`MAX_STEPS` steps each
are aligned (longer inputs are cut, and :attr:`MultiAlignment.truncated` says so). The merge
does ``N − 1`` pairwise DPs of at most ``MAX_STEPS × MAX_STEPS`` cells against the centre, plus
the centre choice (at most :data:`CENTRE_BUDGET` cells), plus the insertion merges (each at most
the length of the inserted runs times the slot's columns). With the defaults that is at most
about 16 × 40,000 + 400,000 cells — about a second of one core in the worst case, and a few
milliseconds for the short agent episodes of a GRPO group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer_core.recording.align import (
    GAP_PENALTY,
    _is_message,
    _json,
    _params_of,
    _tool_of,
    align_steps,
    step_similarity,
)

__all__ = [
    "CENTRE_BUDGET",
    "MAX_SEQUENCES",
    "MAX_STEPS",
    "Column",
    "MultiAlignment",
    "align_many",
]

MAX_SEQUENCES = 16
"""Most sequences aligned together (a GRPO group larger than this shows its first 16)."""

MAX_STEPS = 200
"""Most steps of one sequence aligned (the rest are cut and reported)."""

CENTRE_BUDGET = 400_000
"""Most DP cells spent choosing the centre by pairwise scores (else: the median length)."""


@dataclass
class Column:
    """One column of the table: per sequence, the index of its step here or None (a gap).

    ``kind`` is ``"centre"`` (a centre step's column: ``centre_index`` is that step) or
    ``"insertion"`` (steps some sequences took between two centre steps). ``cells[k]`` is
    sequence ``k``'s step index (None: no step of ``k`` here); ``relations[k]`` how it relates to
    the column's reference step (the centre's, or the column's first): ``same``,
    ``changed_params`` (same tool, other params), ``changed_text`` (a message, other text),
    ``different`` (another tool), ``gap`` (no step) — the centre's own cell is ``same``."""

    kind: str
    cells: list[int | None]
    relations: list[str]
    centre_index: int | None = None

    @property
    def present(self) -> int:
        """How many sequences have a step in this column."""
        return sum(1 for c in self.cells if c is not None)


@dataclass
class MultiAlignment:
    """The result of :func:`align_many`: the ``centre`` sequence's index, the ``columns`` in
    order, how many sequences and steps were aligned and whether inputs were cut."""

    centre: int | None
    columns: list[Column] = field(default_factory=list)
    sequences: int = 0
    truncated: bool = False
    dropped_sequences: int = 0

    def rows(self) -> list[list[int | None]]:
        """Per sequence, its step index in each column (None: a gap): the table read by rows."""
        return [[col.cells[k] for col in self.columns] for k in range(self.sequences)]

    def column_of(self, sequence: int, step: int) -> int | None:
        """The column index holding ``step`` of ``sequence`` (None: not aligned, e.g. cut)."""
        for n, col in enumerate(self.columns):
            if col.cells[sequence] == step:
                return n
        return None


def _relation(reference: Any, step: Any) -> str:
    """How ``step`` relates to ``reference`` (see :class:`Column`)."""
    if _tool_of(reference) != _tool_of(step):
        return "different"
    if _json(_params_of(reference)) == _json(_params_of(step)):
        return "same"
    return "changed_text" if _is_message(step) else "changed_params"


def _pair_score(left: Sequence[Any], right: Sequence[Any]) -> float:
    """The two-way alignment's total score: pair similarities minus the gap penalties."""
    total = 0.0
    for row in align_steps(left, right).rows:
        if row.left_index is None or row.right_index is None:
            total -= GAP_PENALTY
        else:
            total += step_similarity(left[row.left_index], right[row.right_index])
    return total


def _choose_centre(seqs: list[list[Any]]) -> int:
    n = len(seqs)
    cells = sum(len(seqs[i]) * len(seqs[j]) for i in range(n) for j in range(i + 1, n))
    if cells > CENTRE_BUDGET:
        by_length = sorted(range(n), key=lambda k: (len(seqs[k]), k))
        return by_length[(n - 1) // 2]
    totals = [0.0] * n
    for i in range(n):
        for j in range(i + 1, n):
            distance = (len(seqs[i]) + len(seqs[j])) / 2 - _pair_score(seqs[i], seqs[j])
            totals[i] += distance
            totals[j] += distance
    return min(range(n), key=lambda k: (totals[k], k))


def _merge_slot(
    slot: list[list[tuple[int, int]]], seqs: list[list[Any]], k: int, run: list[int]
) -> None:
    """Merge sequence ``k``'s inserted steps ``run`` into the slot's columns (each a list of
    ``(sequence, step)``, its first entry its reference)."""
    if not run:
        return
    if not slot:
        slot.extend([[(k, i)] for i in run])
        return
    refs = [seqs[col[0][0]][col[0][1]] for col in slot]
    steps = [seqs[k][i] for i in run]
    merged: list[list[tuple[int, int]]] = []
    for row in align_steps(refs, steps).rows:
        if row.left_index is not None:
            col = slot[row.left_index]
            if row.right_index is not None and row.kind != "different":
                col.append((k, run[row.right_index]))
            elif row.right_index is not None:  # a different tool: its own column, after
                merged.append(col)
                col = [(k, run[row.right_index])]
            merged.append(col)
        else:
            merged.append([(k, run[row.right_index])])
    slot[:] = merged


def align_many(
    sequences: Sequence[Sequence[Any]],
    *,
    max_sequences: int = MAX_SEQUENCES,
    max_steps: int = MAX_STEPS,
) -> MultiAlignment:
    """Align N step sequences (anything :func:`~trainer_core.recording.align.align_steps`
    accepts) into columns by a star alignment around their medoid (see the module docstring).
    Sequences beyond ``max_sequences`` are left out and steps beyond ``max_steps`` cut; the
    result says so."""
    dropped = max(0, len(sequences) - max_sequences)
    seqs = [list(s) for s in list(sequences)[:max_sequences]]
    truncated = any(len(s) > max_steps for s in seqs) or dropped > 0
    seqs = [s[:max_steps] for s in seqs]
    n = len(seqs)
    if n == 0:
        return MultiAlignment(centre=None, sequences=0, dropped_sequences=dropped)
    centre = _choose_centre(seqs) if n > 1 else 0
    length = len(seqs[centre])
    # per centre step, who sits in its column; per slot (before centre step c; slot `length` is
    # after the last), the inserted runs of each sequence
    at: list[dict[int, int]] = [{centre: c} for c in range(length)]
    inserted: list[list[list[tuple[int, int]]]] = [[] for _ in range(length + 1)]
    for k in range(n):
        if k == centre:
            continue
        runs: dict[int, list[int]] = {}
        next_centre = 0
        for row in align_steps(seqs[centre], seqs[k]).rows:
            if row.left_index is not None:
                next_centre = row.left_index + 1
                if row.right_index is not None:
                    at[row.left_index][k] = row.right_index
            else:
                runs.setdefault(next_centre, []).append(row.right_index)
        for slot, run in runs.items():
            _merge_slot(inserted[slot], seqs, k, run)

    columns: list[Column] = []

    def add_insertions(slot: int) -> None:
        for col in inserted[slot]:
            cells: list[int | None] = [None] * n
            for k, i in col:
                cells[k] = i
            ref_k, ref_i = col[0]
            reference = seqs[ref_k][ref_i]
            relations = [
                "gap" if cells[k] is None else _relation(reference, seqs[k][cells[k]])
                for k in range(n)
            ]
            columns.append(Column("insertion", cells, relations))

    for c in range(length):
        add_insertions(c)
        cells = [at[c].get(k) for k in range(n)]
        reference = seqs[centre][c]
        relations = [
            "gap" if cells[k] is None else _relation(reference, seqs[k][cells[k]]) for k in range(n)
        ]
        columns.append(Column("centre", cells, relations, centre_index=c))
    add_insertions(length)
    return MultiAlignment(
        centre=centre,
        columns=columns,
        sequences=n,
        truncated=truncated,
        dropped_sequences=dropped,
    )
