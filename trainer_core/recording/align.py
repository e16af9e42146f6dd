"""Step alignment for the trajectory diff: which step of one run corresponds to which of another.

:func:`align_steps` runs a Needleman–Wunsch global alignment over two step sequences, keyed on
each step's ``(tool, params)``. It accepts anything with ``tool``, ``params``, ``observation``
and ``reward`` attributes (the pydantic :class:`~trainer_core.recording.schema.Step`, Django
rows, test stand-ins). A message step (schema 1.1: ``kind == "message"``, with ``role`` and
``text``) is keyed as the "tool" ``message:<role>`` with the params ``{"text": ...}``: a user
message pairs with a user message, a reply with a reply, and two replies whose texts differ are
a ``changed_text`` row (a message never pairs as the same step with a tool call).

Scoring (higher is better; the alignment maximises the total):

* a pair of steps scores its *similarity* in ``[0, 1]``:

  - same tool and equal params: ``1.0``;
  - same tool, different params: ``0.5 + 0.4 * J`` (so in ``[0.5, 0.9]``), where ``J`` is a
    Jaccard-like similarity of the param items: each key in the union of both key sets counts
    ``1`` when both sides hold equal values, ``SequenceMatcher.ratio()`` of the two values'
    JSON text when both are present but differ, and ``0`` when the key is on one side only;
    ``J`` is the mean over the union;
  - different tools: ``0.0``;

* leaving a step unpaired (a gap, ``left_only``/``right_only``) costs :data:`GAP_PENALTY`.

Because a pair never scores below ``0`` while two gaps cost ``2 * GAP_PENALTY``, steps at the
same place with different tools are paired as ``"different"`` rather than split into gaps. A
single inserted step, on the other hand, costs one gap, while shifting every later pair would
throw away their ``1.0`` matches, so it shows as one ``right_only`` row.

Speed. The common prefix and suffix of identical ``(tool, params)`` are paired up front (they
score the maximum, so the optimum is unchanged). The DP on the rest is ``O(n * m)`` in pure
Python over integer ids, with lazily computed, cached pair scores. When both remaining sides
are longer than :data:`BAND_THRESHOLD` it is restricted to the band
``|i - j| <= max(50, |n - m| + 20)`` around the diagonal (alignments drifting further are
approximated). ``SequenceMatcher`` costs ~20 µs a call, so when the band holds more than
:data:`FUZZY_BUDGET` same-tool/different-params cells, ``J`` uses the Jaccard index of the
values' character bigram sets instead of ``SequenceMatcher.ratio()`` (same range and
ordering in practice, ~20× faster); long values (over :data:`EXACT_PARAM_CHARS` together) always
use the proxy, since ``SequenceMatcher``'s worst case grows faster than their length.

:func:`text_diff` (the observation diff) is bounded too: Myers' search with a budget of
comparisons, falling back to lines, then to one changed block.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "BAND_THRESHOLD",
    "FUZZY_BUDGET",
    "GAP_PENALTY",
    "KINDS",
    "AlignedRow",
    "Alignment",
    "StepLike",
    "align_steps",
    "param_diff",
    "reward_delta",
    "step_similarity",
    "text_diff",
    "DiffWork",
    "TEXT_DIFF_BUDGET",
]

GAP_PENALTY = 0.5
"""Cost of leaving one step unpaired."""

BAND_THRESHOLD = 200
"""Above this length on both sides the DP is banded around the diagonal."""

FUZZY_BUDGET = 3000
"""Most same-tool/different-params cells scored with SequenceMatcher (else the bigram proxy)."""

KINDS = (
    "same",
    "changed_observation",
    "changed_params",
    "changed_text",
    "different",
    "left_only",
    "right_only",
)

_DIAG, _UP, _LEFT = 0, 1, 2  # traceback moves: pair, left_only, right_only
_NEG_INF = float("-inf")


class StepLike(Protocol):
    tool: str
    params: Mapping[str, Any]
    observation: str
    reward: float | None


@dataclass(frozen=True)
class AlignedRow:
    """One row of the diff: a pair of steps, or a step present on one side only."""

    left_index: int | None
    right_index: int | None
    kind: str


@dataclass
class Alignment:
    """The result of :func:`align_steps`.

    ``rows`` lists the aligned rows in order; ``first_divergence`` is the position in ``rows``
    of the first row whose kind is not ``"same"`` (``None`` when every row is ``"same"``).
    """

    rows: list[AlignedRow] = field(default_factory=list)
    first_divergence: int | None = None

    @property
    def identical(self) -> bool:
        return self.first_divergence is None

    def counts(self) -> dict[str, int]:
        """How many rows of each kind (every kind present, zero when absent)."""
        out = dict.fromkeys(KINDS, 0)
        for row in self.rows:
            out[row.kind] += 1
        return out

    # Convenience access to the module helpers, e.g. from templates holding an Alignment.
    @staticmethod
    def param_diff(left_params: Mapping[str, Any] | None, right_params: Mapping[str, Any] | None):
        return param_diff(left_params, right_params)

    @staticmethod
    def text_diff(a: str | None, b: str | None):
        return text_diff(a, b)

    @staticmethod
    def reward_delta(left_step: Any, right_step: Any):
        return reward_delta(left_step, right_step)


# --------------------------------------------------------------------------- similarity


def _is_message(step: Any) -> bool:
    return getattr(step, "kind", "tool") == "message"


def _tool_of(step: Any) -> Any:
    """What pairs with what: the tool, or ``message:<role>`` for a message step."""
    if _is_message(step):
        return f"message:{getattr(step, 'role', '')}"
    return getattr(step, "tool", None)


def _params_of(step: Any) -> Mapping[str, Any]:
    if _is_message(step):
        return {"text": getattr(step, "text", "") or ""}
    params = getattr(step, "params", None)
    return params if isinstance(params, Mapping) else {}


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def _param_texts(step: Any) -> dict[str, str]:
    """Each param's value as canonical JSON text (precomputed once per step)."""
    return {str(k): _json(v) for k, v in _params_of(step).items()}


@functools.lru_cache(maxsize=8192)
def _bigrams(text: str) -> frozenset[str]:
    return frozenset(text[k : k + 2] for k in range(max(1, len(text) - 1)))


EXACT_PARAM_CHARS = 2_000
"""Above this length (both values together) two param values are compared by bigram Jaccard,
not ``SequenceMatcher`` (whose worst case is quadratic or worse in their length)."""

EXACT_WORK_BUDGET = 2_000_000
"""Most ``len(a) * len(b)`` one alignment spends on ``SequenceMatcher`` (then: the proxy)."""


class _ExactBudget:
    """How much ``SequenceMatcher`` work an alignment has left (see EXACT_WORK_BUDGET)."""

    def __init__(self, total: int):
        self.left = total

    def take(self, a: str, b: str) -> bool:
        cost = len(a) * len(b)
        if len(a) + len(b) > EXACT_PARAM_CHARS or cost > self.left:
            return False
        self.left -= cost
        return True


def _value_similarity(a: str, b: str, exact: bool | _ExactBudget = True) -> float:
    """Similarity of two JSON texts: SequenceMatcher ratio, or bigram Jaccard as the proxy
    (always for long values, see :data:`EXACT_PARAM_CHARS`, and once an alignment's
    :data:`EXACT_WORK_BUDGET` is spent)."""
    if a == b:
        return 1.0
    if isinstance(exact, _ExactBudget):
        exact = exact.take(a, b)
    if exact and len(a) + len(b) <= EXACT_PARAM_CHARS:
        return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    x, y = _bigrams(a), _bigrams(b)
    return len(x & y) / len(x | y)


def _items_similarity(
    left: dict[str, str], right: dict[str, str], exact: bool | _ExactBudget = True
) -> float:
    """Jaccard-like similarity of two param dicts (JSON texts), in ``[0, 1]``.

    Mean over the union of keys of: 1 for equal values, the value similarity when both sides
    hold the key with different values, 0 when the key is on one side only.
    """
    keys = left.keys() | right.keys()
    if not keys:
        return 1.0
    total = 0.0
    for key in keys:
        if key in left and key in right:
            total += _value_similarity(left[key], right[key], exact)
    return total / len(keys)


def step_similarity(left: Any, right: Any) -> float:
    """The pair score used by :func:`align_steps`: 1.0, 0.5 + 0.4 × J, or 0.0."""
    if _tool_of(left) != _tool_of(right):
        return 0.0
    lp, rp = _params_of(left), _params_of(right)
    if _json(lp) == _json(rp):
        return 1.0
    return 0.5 + 0.4 * _items_similarity(_param_texts(left), _param_texts(right))


# --------------------------------------------------------------------------- alignment


def align_steps(left: Sequence[StepLike], right: Sequence[StepLike]) -> Alignment:
    """Globally align two step sequences on ``(tool, params)`` and classify each row."""
    left, right = list(left), list(right)
    n, m = len(left), len(right)

    # Precompute integer ids for tools and for (tool, params) so the inner loop compares ints.
    tool_ids: dict[Any, int] = {}
    key_ids: dict[tuple[Any, str], int] = {}

    def ids(steps: list[Any]) -> tuple[list[int], list[int]]:
        tools, keys = [], []
        for step in steps:
            tool = _tool_of(step)
            tools.append(tool_ids.setdefault(tool, len(tool_ids)))
            key = (tool, _json(_params_of(step)))
            keys.append(key_ids.setdefault(key, len(key_ids)))
        return tools, keys

    ltools, lkeys = ids(left)
    rtools, rkeys = ids(right)

    # Trim the common prefix and suffix of identical (tool, params): pairing equal steps
    # scores the maximum 1.0, so this never changes the optimum, and it keeps the DP small.
    pre = 0
    while pre < n and pre < m and lkeys[pre] == rkeys[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and suf < m - pre and lkeys[n - 1 - suf] == rkeys[m - 1 - suf]:
        suf += 1
    pairs = _align_core(
        left[pre : n - suf],
        right[pre : m - suf],
        ltools[pre : n - suf],
        lkeys[pre : n - suf],
        rtools[pre : m - suf],
        rkeys[pre : m - suf],
    )
    pairs = (
        [(k, k) for k in range(pre)]
        + [(None if li is None else li + pre, None if ri is None else ri + pre) for li, ri in pairs]
        + [(n - suf + k, m - suf + k) for k in range(suf)]
    )

    rows: list[AlignedRow] = []
    first: int | None = None
    for li, ri in pairs:
        if ri is None:
            kind = "left_only"
        elif li is None:
            kind = "right_only"
        elif ltools[li] != rtools[ri]:
            kind = "different"
        elif lkeys[li] != rkeys[ri]:
            kind = "changed_text" if _is_message(left[li]) else "changed_params"
        elif (getattr(left[li], "observation", "") or "") == (
            getattr(right[ri], "observation", "") or ""
        ):
            kind = "same"
        else:
            kind = "changed_observation"
        if first is None and kind != "same":
            first = len(rows)
        rows.append(AlignedRow(li, ri, kind))
    return Alignment(rows=rows, first_divergence=first)


def _align_core(
    left: list[Any],
    right: list[Any],
    ltools: list[int],
    lkeys: list[int],
    rtools: list[int],
    rkeys: list[int],
) -> list[tuple[int | None, int | None]]:
    """The (banded) Needleman–Wunsch DP and traceback; returns ``(left, right)`` index pairs."""
    n, m = len(left), len(right)
    band = max(n, m) + 1
    if n > BAND_THRESHOLD and m > BAND_THRESHOLD:
        band = max(50, abs(n - m) + 20)

    # Fuzzy (same tool, different params) pairs are scored with SequenceMatcher while there are
    # few enough of them in the band; beyond that, with the bigram proxy (see module docstring).
    exact: bool | _ExactBudget = False
    if _fuzzy_pairs(ltools, lkeys, rtools, rkeys, band) <= FUZZY_BUDGET:
        exact = _ExactBudget(EXACT_WORK_BUDGET)
    litems = [_param_texts(step) for step in left]
    ritems = [_param_texts(step) for step in right]
    cache: dict[tuple[int, int], float] = {}

    def fuzzy(i: int, j: int) -> float:
        ck = (lkeys[i], rkeys[j])
        s = cache.get(ck)
        if s is None:
            s = cache[ck] = 0.5 + 0.4 * _items_similarity(litems[i], ritems[j], exact)
        return s

    gap = GAP_PENALTY
    prev = [_NEG_INF] * (m + 1)
    for j in range(min(m, band) + 1):
        prev[j] = -gap * j
    trace = [bytearray(m + 1) for _ in range(n + 1)]
    trace[0][1:] = bytes([_LEFT]) * m

    for i in range(1, n + 1):
        cur = [_NEG_INF] * (m + 1)
        tr = trace[i]
        if i <= band:
            cur[0] = -gap * i
            tr[0] = _UP
        lt, lk = ltools[i - 1], lkeys[i - 1]
        for j in range(max(1, i - band), min(m, i + band) + 1):
            rt = rtools[j - 1]
            if rt != lt:
                s = 0.0
            elif rkeys[j - 1] == lk:
                s = 1.0
            else:
                s = fuzzy(i - 1, j - 1)
            best = prev[j - 1] + s
            move = _DIAG
            up = prev[j] - gap
            if up > best:
                best, move = up, _UP
            lf = cur[j - 1] - gap
            if lf > best:
                best, move = lf, _LEFT
            cur[j] = best
            tr[j] = move
        prev = cur

    return _traceback(trace, n, m)


def _fuzzy_pairs(
    ltools: list[int], lkeys: list[int], rtools: list[int], rkeys: list[int], band: int
) -> int:
    """How many (left, right) pairs within the band have the same tool and different params."""
    n, m = len(ltools), len(rtools)
    count = 0
    for i in range(n):
        lt, lk = ltools[i], lkeys[i]
        for j in range(max(0, i - band), min(m, i + band + 1)):
            if rtools[j] == lt and rkeys[j] != lk:
                count += 1
    return count


def _traceback(trace: list[bytearray], n: int, m: int) -> list[tuple[int | None, int | None]]:
    """Follow the DP's moves back from (n, m): ``(left, right)`` index pairs in order, None on
    the side of a gap."""
    pairs: list[tuple[int | None, int | None]] = []
    i, j = n, m
    while i > 0 or j > 0:
        move = trace[i][j] if i > 0 and j > 0 else (_UP if j == 0 else _LEFT)
        if move == _DIAG:
            i, j = i - 1, j - 1
            pairs.append((i, j))
        elif move == _UP:
            i -= 1
            pairs.append((i, None))
        else:
            j -= 1
            pairs.append((None, j))
    pairs.reverse()
    return pairs


# --------------------------------------------------------------------------- helpers


def param_diff(
    left_params: Mapping[str, Any] | None, right_params: Mapping[str, Any] | None
) -> list[tuple[Any, Any, Any]]:
    """``(key, left_value, right_value)`` for every key whose values differ, sorted by key.

    A key missing on one side reports ``None`` for that side.
    """
    lp, rp = left_params or {}, right_params or {}
    out = []
    for key in sorted(set(lp) | set(rp), key=str):
        lv, rv = lp.get(key), rp.get(key)
        if key not in lp or key not in rp or lv != rv:
            out.append((key, lv, rv))
    return out


_TOKEN = re.compile(r"\s+|[^\s]+")

TEXT_DIFF_BUDGET = 200_000
"""Most comparisons one level of :func:`text_diff`'s Myers search makes (words, then lines): a
diff costs at most twice this (about 0.2 s of one core), however long or unlike the texts."""


@dataclass
class DiffWork:
    """What :func:`text_diff` did: ``work`` comparisons (never above the budget it was given)
    and the ``level`` of the differences it returns — ``"word"``, ``"line"``, or ``"block"``
    (the differing middle as one deletion and one insertion, when finer ones would cost more
    than the budget)."""

    work: int = 0
    level: str = "word"
    budget: int = 0  # the most ``work`` could have been: twice the budget per level


def text_diff(
    a: str | None, b: str | None, *, budget: int = TEXT_DIFF_BUDGET, work: DiffWork | None = None
) -> list[tuple[str, str]]:
    """Word-level diff of two texts as ``(op, text)`` with op ``equal``, ``delete``, ``insert``.

    Whitespace is kept as its own tokens, so joining the ``equal`` + ``delete`` pieces gives
    back ``a`` and joining ``equal`` + ``insert`` gives back ``b``. Adjacent pieces with the
    same op are merged; a replacement is a ``delete`` followed by an ``insert``.

    Bounded: the common prefix and suffix are matched in linear time, and the rest by Myers'
    O((N+M)·D) search, stopped once it has made ``budget`` comparisons; it then tries lines
    instead of words (``budget`` more), and last shows the differing middle as one block.
    ``work`` (a :class:`DiffWork`) receives what was spent and at which level.
    """
    work = work if work is not None else DiffWork()
    work.work, work.level, work.budget = 0, "word", 2 * budget
    out: list[tuple[str, str]] = []

    def emit(op: str, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    ta, tb = _TOKEN.findall(a or ""), _TOKEN.findall(b or "")
    pre = _common_prefix(ta, tb)
    suf = _common_prefix(ta[pre:][::-1], tb[pre:][::-1])
    mid_a, mid_b = ta[pre : len(ta) - suf], tb[pre : len(tb) - suf]
    emit("equal", "".join(ta[:pre]))
    ops = _myers(mid_a, mid_b, budget, work)
    if ops is None:
        work.level = "line"
        mid_a = "".join(mid_a).splitlines(keepends=True)
        mid_b = "".join(mid_b).splitlines(keepends=True)
        ops = _myers(mid_a, mid_b, work.work + budget, work)
    if ops is None:
        work.level = "block"
        ops = [("delete", 0, len(mid_a)), ("insert", 0, len(mid_b))]
    for op, start, end in ops:
        emit(op, "".join((mid_b if op == "insert" else mid_a)[start:end]))
    emit("equal", "".join(ta[len(ta) - suf :]))
    return out


def _common_prefix(x: Sequence[str], y: Sequence[str]) -> int:
    n = 0
    for p, q in zip(x, y, strict=False):
        if p != q:
            break
        n += 1
    return n


def _myers(
    x: Sequence[str], y: Sequence[str], budget: int, work: DiffWork
) -> list[tuple[str, int, int]] | None:
    """Myers' shortest edit script of ``x`` into ``y`` as ``(op, start, end)`` runs (``equal``
    and ``delete`` index ``x``, ``insert`` indexes ``y``), or None when ``work.work`` (every
    comparison counts) would pass ``budget`` first."""
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        return [("delete", 0, n)] * bool(n) + [("insert", 0, m)] * bool(m)
    offset = n + m
    v = [0] * (2 * offset + 2)
    trace: list[list[int]] = []
    for d in range(n + m + 1):
        trace.append(v[offset - d : offset + d + 2])  # the frontier before round d
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                i = v[offset + k + 1]  # down: an insertion
            else:
                i = v[offset + k - 1] + 1  # right: a deletion
            j = i - k
            while i < n and j < m and x[i] == y[j] and work.work < budget:
                i, j = i + 1, j + 1
                work.work += 1
            if work.work >= budget:
                return None
            work.work += 1
            v[offset + k] = i
            if i >= n and j >= m:
                return _myers_path(trace, d, n, m)
    return None  # not reached: round n + m always ends the search


def _myers_path(trace: list[list[int]], d_end: int, n: int, m: int) -> list[tuple[str, int, int]]:
    """Walk the saved frontiers back from (n, m) to (0, 0): the edit script as runs.
    ``trace[d]`` is the frontier before round d, holding diagonal k at index ``k + d``."""
    moves: list[tuple[str, int]] = []  # (op, index), the last move first
    x, y = n, m
    for d in range(d_end, 0, -1):
        frontier = trace[d]
        k = x - y
        down = k == -d or (k != d and frontier[k - 1 + d] < frontier[k + 1 + d])
        prev_k = k + 1 if down else k - 1
        prev_x = frontier[prev_k + d]
        prev_y = prev_x - prev_k
        start_x, start_y = (prev_x, prev_y + 1) if down else (prev_x + 1, prev_y)
        while x > start_x and y > start_y:  # the snake after the edit
            x, y = x - 1, y - 1
            moves.append(("equal", x))
        moves.append(("insert", prev_y) if down else ("delete", prev_x))
        x, y = prev_x, prev_y
    while x > 0:  # round 0's snake: a common prefix (x == y)
        x -= 1
        moves.append(("equal", x))
    runs: list[tuple[str, int, int]] = []
    for op, index in reversed(moves):
        if runs and runs[-1][0] == op and runs[-1][2] == index:
            runs[-1] = (op, runs[-1][1], index + 1)
        else:
            runs.append((op, index, index + 1))
    return runs


def reward_delta(left_step: Any, right_step: Any) -> float | None:
    """``right.reward - left.reward``, or ``None`` when either side has no reward."""
    lr = getattr(left_step, "reward", None) if left_step is not None else None
    rr = getattr(right_step, "reward", None) if right_step is not None else None
    if lr is None or rr is None:
        return None
    return float(rr) - float(lr)
