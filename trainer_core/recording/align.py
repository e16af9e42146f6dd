"""Step alignment for the trajectory diff: which step of one run corresponds to which of another.

:func:`align_steps` runs a Needleman–Wunsch global alignment over two step sequences, keyed on
each step's ``(tool, params)``. It accepts anything with ``tool``, ``params``, ``observation``
and ``reward`` attributes (the pydantic :class:`~trainer_core.recording.schema.Step`, Django
rows, test stand-ins).

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
ordering in practice, ~20× faster). :func:`step_similarity` always uses ``SequenceMatcher``.
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
]

GAP_PENALTY = 0.5
"""Cost of leaving one step unpaired."""

BAND_THRESHOLD = 200
"""Above this length on both sides the DP is banded around the diagonal."""

FUZZY_BUDGET = 3000
"""Most same-tool/different-params cells scored with SequenceMatcher (else the bigram proxy)."""

KINDS = ("same", "changed_observation", "changed_params", "different", "left_only", "right_only")

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


def _params_of(step: Any) -> Mapping[str, Any]:
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


def _value_similarity(a: str, b: str, exact: bool = True) -> float:
    """Similarity of two JSON texts: SequenceMatcher ratio, or bigram Jaccard as the proxy."""
    if a == b:
        return 1.0
    if exact:
        return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    x, y = _bigrams(a), _bigrams(b)
    return len(x & y) / len(x | y)


def _items_similarity(left: dict[str, str], right: dict[str, str], exact: bool = True) -> float:
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
    if getattr(left, "tool", None) != getattr(right, "tool", None):
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
            tool = getattr(step, "tool", None)
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
            kind = "changed_params"
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
    exact = _fuzzy_pairs(ltools, lkeys, rtools, rkeys, band) <= FUZZY_BUDGET
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


def text_diff(a: str | None, b: str | None) -> list[tuple[str, str]]:
    """Word-level diff of two texts as ``(op, text)`` with op ``equal``, ``delete``, ``insert``.

    Whitespace is kept as its own tokens, so joining the ``equal`` + ``delete`` pieces gives
    back ``a`` and joining ``equal`` + ``insert`` gives back ``b``. Adjacent pieces with the
    same op are merged; a replacement is a ``delete`` followed by an ``insert``.
    """
    ta, tb = _TOKEN.findall(a or ""), _TOKEN.findall(b or "")
    out: list[tuple[str, str]] = []

    def emit(op: str, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            emit("equal", "".join(ta[i1:i2]))
        else:
            emit("delete", "".join(ta[i1:i2]))
            emit("insert", "".join(tb[j1:j2]))
    return out


def reward_delta(left_step: Any, right_step: Any) -> float | None:
    """``right.reward - left.reward``, or ``None`` when either side has no reward."""
    lr = getattr(left_step, "reward", None) if left_step is not None else None
    rr = getattr(right_step, "reward", None) if right_step is not None else None
    if lr is None or rr is None:
        return None
    return float(rr) - float(lr)
