"""The rule layer: deterministic per-step checks, each linear in the number of steps.

:func:`step_rule_scores` walks a trajectory once and gives every step five scores in 0..1, one
rule per score (:class:`RedundancyRule`, :class:`RegressionRule`, :class:`InfoUseRule`,
:func:`~trainer_core.rewards.evidence.call_failure` for ``success``, and :func:`non_redundancy`
of the first two), each fed the step as :func:`read_step` reads it:

``redundancy``
    1.0 unless the step repeats earlier work:

    * an *exact repeat* of an earlier call (same canonical tool, same parameters) scores 0.0 for
      read and search tools and 0.3 for every other tool, unless what it looks at changed since
      that earlier call (below);
    * a *read of a target already read* (``read_file`` of a path, ``list_dir`` of a directory, a
      page element) scores 0.0 even with other parameters (another line range, an offset) when
      the target did not change since that read.

    What counts as a change: a write-category step to the same file target or to a path under it
    (a write to ``src/a.py`` changes ``src/a.py``, ``src`` and the workspace), or a write with no
    target at all. A target that is not a file path (a page element, a URL, a note title) and a
    read or search with no target also change with any write, execute or navigate step (a click,
    a shell command, a new page may change what they return).
    An exact repeat of an *execute* step (``bash pytest``) is not redundant when any write
    happened since the earlier call: running the tests again after an edit is the right thing
    to do.

``regression``
    0.0 for a write that exactly undoes an earlier write to the same target, else 1.0:

    * an edit whose old and new text are an earlier edit's new and old text, swapped (parameter
      pairs ``old_string/new_string``, ``old_str/new_str``, ``old/new``, ``old_text/new_text``);
    * a full write (``content`` or ``file_text``) — or an edit applied to content known from a
      full write — that puts back the content the target had before the previous write;
    * an editor's ``undo_edit`` command on a target written before.

``info_use``
    0.7 for a write or execute step whose parameters use none of the identifiers and values
    earlier texts revealed, once some earlier text held one; 0.3 for a submit step whose answer
    states a word or number no earlier text accounts for; 0.3 for a read step that opened the
    near-duplicate of a record the request names (its observation shows ``Cellik`` and not
    ``Celik``, the name the prompt asks about, though an earlier listing offered both and the
    read's id was picked from the line naming ``Cellik``:
    :func:`~trainer_core.rewards.evidence.near_miss_read`); else 1.0. The first step and a
    submit that states no answer are free. Earlier texts are the
    observations of earlier steps and the texts the agent saw besides them (``context`` of
    :func:`step_rule_scores`: the task prompt, the user's dialogue turns; see
    :func:`trajectory_texts`). Search, think and navigate steps are not held to it, read steps
    only to the near-duplicate check.
    What a word, an identifier or a value is, and how an answer is accounted for, is in
    :mod:`trainer_core.rewards.evidence`: ``HAT136``, ``P-4821``, UUIDs, numbers of two or
    more digits, paths (by their file names), dotted names (by their tails), and whole parameter
    values made of seen words (``Mia``, ``economy``) all count; parameters are read to any depth
    (``flights[0].flight_number``). Each text is scanned once, at most
    :data:`~trainer_core.rewards.evidence.MAX_SCAN_CHARS` of it, so the work stays linear.

``success``
    0.0 when the trajectory shows that the call failed, else 1.0: an ``error`` field, a non-zero
    exit code, or an observation that reports an error (the full list is
    :func:`~trainer_core.rewards.evidence.call_failure`'s).

``non_redundancy``
    ``min(redundancy, regression)`` (the ``non_redundancy`` rubric, see
    :data:`trainer_core.rewards.rubrics.RULE_FOR_RUBRIC`).

A failed call never scores as well as the same call succeeding: :func:`rubric_value`, which
gives a rule-evaluated rubric its value on a step, multiplies every rule but ``success`` by
:data:`FAILED_FACTOR` (0.5) when the call failed — whatever the rubric weights, a failed step's
total is below the same step's total had it worked (unless every rule it is scored on already
gives 0). No rule reads anything but the trajectory: its steps (tool, parameters, observation,
exit code, error), the texts the agent saw, and the domain profile.

Trajectory-level rules: :func:`efficiency` and :func:`outcome_score`.

Tools and targets
-----------------
The domain profile gives each tool (and its aliases, case-insensitive) a category and a target
parameter; :class:`RuleContext` caches them. A tool the profile does not know gets a category
from its name (:func:`infer_category`): ``read_file``/``cat``/``Read``/``view``/``ls`` → read,
``grep``/``search``/``find``/``glob`` → search, ``edit``/``write``/``str_replace``/``create`` →
write, ``bash``/``run``/``execute``/``python``/``shell`` → execute, ``submit``/``finish`` →
submit, ``think`` → think, ``navigate``/``goto`` → navigate; anything else is ``execute`` (the
safe default: it is held to the info-use check and to the 0.3 repeat penalty, never to read
rules). Its target is the first of ``path``, ``file_path``, ``file``, ``filename``, ``url``
present; a known tool whose ``target_param`` is absent from a call falls back to the same keys.
A write-category tool called with ``command="view"`` (SWE-agent / Anthropic
``str_replace_editor``) is a read for that step. File targets are compared after dropping a
leading ``./`` and a trailing ``/``; ``.`` and an empty path mean the whole workspace.

Differences from knowlyr-reward (``agentreward.rules``)
-------------------------------------------------------
* Linear: knowlyr keeps earlier calls in a list (``call_key in seen_calls``) and scans the
  trajectory backwards for the last read / edit of a file at every step, and compares every info
  piece with every later step's parameters — quadratic, ~6–7k steps/s at 1,000 steps. Here every
  check is a hash lookup and every observation is tokenised once.
* Execute repeats after a write score 1.0 (knowlyr: 0.3 for any repeated non-read call).
* Tools by category from the domain profile (aliases included), not by a hard-coded list of
  names (knowlyr treats only ``read_file``/``Read``/``cat``/``grep``/``Grep``/``Glob`` as reads and
  ``Edit``/``edit_file``/``Write``/``write_file`` as edits, so ``view``, ``list_dir`` or a browser
  read never get read rules, and ``Bash`` alone is held to info use).
* A change to a file is a write to it *or to a path under a searched/listed directory*; knowlyr
  only looks at ``file_path``/``path`` equality for ``read_file``/``Read``, so a repeated grep
  after an edit of a file in the grepped directory scores 0.0 there and 1.0 here.
* Regression also catches full rewrites back to earlier content and ``undo_edit``; knowlyr only
  compares swapped ``old_string``/``new_string``.
* Info use tokenises both sides the same way (so ``load_config(path)`` yields ``load_config``;
  knowlyr keeps only whole whitespace-separated words that are identifiers or contain ``/``, and
  then needs the piece as a substring of ``str(params)``).
* :func:`outcome_score` returns None (unknown) when the outcome says nothing, where knowlyr
  returns 0.0; it reads the profile's outcome fields and falls back to the outcome's own
  ``score`` and to ``tests_passed + tests_failed`` as the total when ``tests_total`` is missing.
* :func:`efficiency` returns None when there is no reference (knowlyr defaults the reference to
  the trajectory's own length, i.e. always 1.0).

Known limits (shared with knowlyr): a shell command that changes files (``sed -i``,
``git checkout``) is not seen as a write to them, and targets are compared as text, so
``/repo/a.py`` and ``a.py`` are two targets. A step is scored from what came before it and what
it shows itself, never from later steps: a plausible but wrong edit that applies cleanly scores
like a right one (the check that fails after it is the step that scores low).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer_core.recording.schema import context_messages
from trainer_core.rewards.evidence import (
    Grounding,
    answer_of,
    call_failure,
    informative,
    name_words,
    names_by_id,
    near_miss_read,
    param_leaves,
    scan_texts,
    scan_words,
    uses_seen,
)
from trainer_core.rewards.outcome import outcome_score
from trainer_core.rewards.tool_categories import infer_category

__all__ = [
    "ANSWER_UNGROUNDED",
    "FAILED_FACTOR",
    "INFO_UNUSED",
    "NEAR_MISS_READ",
    "PATH_KEYS",
    "RULE_NAMES",
    "InfoUseRule",
    "RedundancyRule",
    "RegressionRule",
    "RuleContext",
    "StepView",
    "ToolInfo",
    "efficiency",
    "infer_category",
    "non_redundancy",
    "outcome_score",
    "read_status",
    "read_step",
    "rubric_value",
    "step_rule_rows",
    "step_rule_scores",
    "trajectory_texts",
]

#: the per-step rule scores :func:`step_rule_scores` gives
RULE_NAMES: tuple[str, ...] = ("redundancy", "regression", "info_use", "success", "non_redundancy")

#: content longer than this is not tracked for full-write regressions
MAX_TRACKED_CONTENT = 1_000_000

#: parameters that hold a file or directory path (a target under one of them is file-scoped)
PATH_KEYS: frozenset[str] = frozenset(
    {"path", "file_path", "file", "filename", "filepath", "target_file", "notebook_path", "dir"}
)
#: where the target of a call is looked for when the profile names none (in this order)
_TARGET_FALLBACK: tuple[str, ...] = ("path", "file_path", "file", "filename", "url")
_FALLBACK_KEYS = frozenset(_TARGET_FALLBACK)

#: the (old, new) parameter pairs of an edit, as editors name them (the first present is used)
EDIT_PAIRS: tuple[tuple[str, str], ...] = (
    ("old_string", "new_string"),
    ("old_str", "new_str"),
    ("old", "new"),
    ("old_text", "new_text"),
)
#: the parameters of a full write (the whole new content of the target)
CONTENT_KEYS: tuple[str, ...] = ("content", "file_text")

#: redundancy of a repeated read or search; of any other repeated call
REPEAT_READ = 0.0
REPEAT_OTHER = 0.3
#: info use of a write or execute step that uses nothing earlier observations revealed
INFO_UNUSED = 0.7
#: info use of a submit step whose answer no earlier text accounts for
ANSWER_UNGROUNDED = 0.3
#: info use of a read step that opened a near-duplicate of the record the request names
NEAR_MISS_READ = 0.3
#: what every rule but ``success`` is multiplied by on a step whose call failed
FAILED_FACTOR = 0.5

# --- tools ---------------------------------------------------------------------------------------
# a tool the profile does not know gets its category from its name: infer_category, in
# trainer_core.rewards.tool_categories


@dataclass(frozen=True)
class ToolInfo:
    """What the rules need to know about one tool name."""

    name: str  # canonical name (a profile tool's name; an unknown tool's lower-cased name)
    category: str
    target_param: str | None
    known: bool  # the profile defines it


@dataclass
class RuleContext:
    """Tool lookups for the rules, built once per profile (:meth:`from_profile`) and reused for
    every trajectory of that profile. Unknown tool names are inferred once and cached."""

    tools: dict[str, ToolInfo] = field(default_factory=dict)  # lower-cased name or alias → info
    profile_name: str = ""
    _cache: dict[str, ToolInfo] = field(default_factory=dict, repr=False)
    #: file targets as written -> normalised (see read_step), shared by the passes with this
    #: context (emptied before a pass once it holds _PATHS_LIMIT of them)
    _paths: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    _CACHE_LIMIT = 4096
    _PATHS_LIMIT = 1024

    @classmethod
    def from_profile(cls, profile: Any = None) -> RuleContext:
        """From a :class:`~trainer_core.envs.profiles.DomainProfile` (or None: every tool is
        inferred from its name)."""
        tools: dict[str, ToolInfo] = {}
        if profile is not None:
            for tool in profile.tools:
                info = ToolInfo(tool.name, tool.category, tool.target_param, True)
                for name in (tool.name, *tool.aliases):
                    tools[name.strip().lower()] = info
        return cls(tools=tools, profile_name=getattr(profile, "name", "") or "")

    def resolve(self, name: str) -> ToolInfo:
        info = self._cache.get(name)
        if info is not None:
            return info
        key = (name or "").strip().lower()
        info = self.tools.get(key)
        if info is None:
            info = ToolInfo(key, infer_category(name.strip() or "unknown"), None, False)
        if len(self._cache) < self._CACHE_LIMIT:
            self._cache[name] = info
        return info

    def category_of(self, name: str) -> str:
        return self.resolve(name).category


# --- one step as the rules see it ----------------------------------------------------------------


def _norm_path(target: str) -> str | None:
    first, last = target[:1], target[-1:]
    if first and first != "." and last != "/" and not first.isspace() and not last.isspace():
        return target  # as it is written, as a rule: nothing to strip or drop
    target = target.strip()
    while target.startswith("./"):
        target = target[2:]
    if len(target) > 1:
        target = target.rstrip("/") or "/"
    if target in ("", "."):
        return None
    return target


def _mapping_fields(step: Any) -> tuple[str, Any, Any]:
    if isinstance(step, Mapping):
        observation = step.get("observation")
        if observation is None:
            observation = step.get("output")
        return str(step.get("tool") or ""), step.get("params"), observation
    raise TypeError(
        f"a step is a Step or a dict with tool, params and observation, not {type(step).__name__}"
    )


#: One step as the rules see it (:func:`read_step`): (canonical tool name, category, parameters,
#: target, whether the target is a file path, observation).
StepView = tuple[str, str, Mapping[str, Any], "str | None", bool, Any]


def read_step(step: Any, ctx: RuleContext, paths: dict[str, str]) -> StepView:
    """``step`` (a Step, or a dict with ``tool``, ``params`` and ``observation`` or ``output``) as
    the rules see it: the tool resolved through ``ctx`` (its canonical name and category; a
    write-category call with ``command="view"`` is a read), the parameters (``{}`` when they are
    not a mapping), the target and the observation. A target found under a :data:`PATH_KEYS`
    parameter is a normalised file path (``file_scoped``); an empty target is None. ``paths``
    caches the normalised paths (one dict per pass)."""
    try:
        tool = step.tool
        params = step.params
        observation = step.observation
    except AttributeError:
        tool, params, observation = _mapping_fields(step)
    if type(params) is not dict and not isinstance(params, Mapping):
        params = {}
    info = ctx._cache.get(tool)
    if info is None:
        info = ctx.resolve(str(tool))
    category = info.category
    if category == "write" and params.get("command") == "view":
        category = "read"
    key_used = info.target_param
    target = params.get(key_used) if key_used else None
    if type(target) is not str:
        target = None
        for key_used in () if params.keys().isdisjoint(_FALLBACK_KEYS) else _TARGET_FALLBACK:
            value = params.get(key_used)
            if type(value) is str:
                target = value
                break
    file_scoped = False
    if target is not None:
        if key_used in PATH_KEYS:
            normed = paths.get(target)
            if normed is None:
                normed = paths[target] = _norm_path(target) or ""
            target = normed or None
            file_scoped = target is not None
        elif not target:
            target = None
    return info.name, category, params, target, file_scoped, observation


def read_status(step: Any) -> tuple[Any, Any]:
    """``step``'s exit code and error field (None when it has none), from a Step or a dict."""
    try:
        return step.exit_code, step.error
    except AttributeError:
        if isinstance(step, Mapping):
            return step.get("exit_code"), step.get("error")
        return None, None


# --- the per-step rules --------------------------------------------------------------------------
# Each rule keeps what it needs to know of the earlier steps; score() scores one step and then
# remembers it, so one rule object scores one trajectory, in step order. ``why``: None, or a dict
# that gets the rule's reason when the score is below 1.0.


class RedundancyRule:
    """``redundancy``: penalises repeating earlier work that nothing has changed since.

    score = 0.0 (:data:`REPEAT_READ`) for a read or search that repeats an earlier call (same
    canonical tool, same parameters), or a read of a target already read (other parameters
    allowed), when what it looks at did not change since; 0.3 (:data:`REPEAT_OTHER`) for any
    other repeated call, except an execute step repeated after a write (the tests again after
    an edit); else 1.0. What counts as a change is in the module docstring.
    """

    __slots__ = (
        "last_call",
        "last_env_change",
        "last_read",
        "last_untargeted_write",
        "last_write_any",
        "last_write_under",
    )

    def __init__(self) -> None:
        self.last_call: dict[Any, int] = {}  # (tool, params) → last index
        self.last_read: dict[str, int] = {}  # read target → last index
        self.last_write_under: dict[str, int] = {}  # file target or a directory above it
        self.last_write_any = -1  # any write-category step
        self.last_untargeted_write = -1  # a write with no target (changes every file)
        self.last_env_change = -1  # any write, execute or navigate step

    def score(
        self,
        index: int,
        name: str,
        category: str,
        params: Mapping[str, Any],
        target: str | None,
        file_scoped: bool,
        why: dict[str, str] | None,
    ) -> float:
        """The redundancy of the step at position ``index``; then remembers its call, its read
        target and, for a write, execute or navigate step, that something changed."""
        redundancy = 1.0
        try:
            call_key: Any = (name, frozenset(params.items()))
            prev_call = self.last_call.get(call_key)
        except TypeError:  # unhashable values (lists, dicts)
            call_key = (name, json.dumps(params, sort_keys=True, default=str))
            prev_call = self.last_call.get(call_key)
        if category == "read" or category == "search":
            if file_scoped:
                changed_at = self.last_write_under.get(target, -1)
                if self.last_untargeted_write > changed_at:
                    changed_at = self.last_untargeted_write
            else:
                changed_at = self.last_env_change
            if prev_call is not None and changed_at < prev_call:
                redundancy = REPEAT_READ
                if why is not None:
                    why["redundancy"] = f"repeats step {prev_call} with nothing changed since"
            elif category == "read" and target is not None:
                prev_read = self.last_read.get(target)
                if prev_read is not None and changed_at < prev_read:
                    redundancy = REPEAT_READ
                    if why is not None:
                        why["redundancy"] = (
                            f"reads {target!r} again, unchanged since step {prev_read}"
                        )
            if category == "read" and target is not None:
                self.last_read[target] = index
        elif prev_call is not None:
            if category == "execute" and self.last_write_any > prev_call:
                pass  # running it again after a change (tests after an edit) is not redundant
            else:
                redundancy = REPEAT_OTHER
                if why is not None:
                    why["redundancy"] = f"repeats step {prev_call}"
        self.last_call[call_key] = index
        if category == "write":
            self._remember_write(index, target, file_scoped)
        elif category == "execute" or category == "navigate":
            self.last_env_change = index
        return redundancy

    def _remember_write(self, index: int, target: str | None, file_scoped: bool) -> None:
        """A write changes its target and, for a file path, every directory above it."""
        self.last_write_any = index
        self.last_env_change = index
        if target is None:
            self.last_untargeted_write = index
            return
        self.last_write_under[target] = index
        if file_scoped:
            cut = target.rfind("/")
            depth = 0
            while cut > 0 and depth < 32:
                target = target[:cut]
                self.last_write_under[target] = index
                cut = target.rfind("/")
                depth += 1


class RegressionRule:
    """``regression``: penalises a write that exactly undoes an earlier write to its target.

    score = 0.0 for an edit whose old and new text are an earlier edit's new and old text
    (:data:`EDIT_PAIRS`), a full write (:data:`CONTENT_KEYS`, or an edit applied to content known
    from a full write) that puts back the content the target had before its previous write, or an
    ``undo_edit`` command on a target written before; else 1.0 (every step that is not a write).
    """

    __slots__ = ("before_last", "content", "seen_edits")

    def __init__(self) -> None:
        self.seen_edits: set[tuple[str, str, str]] = set()  # (target, old, new)
        self.content: dict[str, str | None] = {}  # known content of a target (full writes)
        self.before_last: dict[str, str | None] = {}  # content before the last write to it

    def score(
        self,
        category: str,
        params: Mapping[str, Any],
        target: str | None,
        why: dict[str, str] | None,
    ) -> float:
        """The regression of one step (1.0 unless it is a write); then remembers what a write
        did to its target's content."""
        if category != "write":
            return 1.0
        tkey = target if target is not None else ""
        prior = self.content.get(tkey)
        new_content: str | None = None
        undo = False
        for old_key, new_key in EDIT_PAIRS:
            old = params.get(old_key)
            if old is None:
                continue
            new = params.get(new_key)
            if type(old) is str and type(new) is str:
                if old != new:
                    if (tkey, new, old) in self.seen_edits:
                        undo = True
                    self.seen_edits.add((tkey, old, new))
                    if prior is not None and old and old in prior:
                        new_content = prior.replace(old, new, 1)
            break
        else:
            for content_key in CONTENT_KEYS:
                value = params.get(content_key)
                if type(value) is str:
                    new_content = value
                    break
            if params.get("command") == "undo_edit" and tkey in self.before_last:
                undo = True
        if not undo and new_content is not None and new_content != prior:
            earlier = self.before_last.get(tkey)
            if earlier is not None and earlier == new_content:
                undo = True
        self.before_last[tkey] = prior
        if new_content is not None and len(new_content) > MAX_TRACKED_CONTENT:
            new_content = None
        self.content[tkey] = new_content
        if not undo:
            return 1.0
        if why is not None:
            why["regression"] = f"undoes an earlier write to {tkey or 'its target'!r}"
        return 0.0


class InfoUseRule:
    """``info_use``: penalises acting without using what earlier texts revealed.

    score = 0.7 (:data:`INFO_UNUSED`) for a write or execute step, not the first step, whose
    parameters use none of the identifiers and values seen in earlier texts, once some earlier
    text held one; 0.3 (:data:`ANSWER_UNGROUNDED`) for a submit step whose answer states a word
    or number no earlier text accounts for; 0.3 (:data:`NEAR_MISS_READ`) for a read step that
    opened the near-duplicate of a record the request names; else 1.0. Texts come
    in through :meth:`observe` (the prompt, dialogue turns) and each step's own observation,
    which counts from the next step on. What counts is in :mod:`trainer_core.rewards.evidence`.
    """

    __slots__ = (
        "acted",
        "grounded_to",
        "grounding",
        "informative_seen",
        "line_names",
        "named",
        "observations",
        "observed",
        "observed_to",
        "seen",
        "seen_to",
        "unchecked",
    )

    def __init__(self) -> None:
        self.acted = False  # a step was scored already (the first one is free to explore)
        # the earlier steps' observations (those with text), each read into the lookups below
        # only when they are needed, up to the position named beside each
        self.observations: list[str] = []
        self.seen: set[bytes] = set()  # words of earlier texts (see _seen())
        self.seen_to = 0
        self.informative_seen = False  # some earlier text held an identifier or value
        self.unchecked: list[list[bytes]] = []  # words not yet checked for that
        self.grounding = Grounding()  # the same words, for checking answers
        self.grounded_to = 0
        self.named: set[bytes] = set()  # the names the request states (prompt, user turns)
        self.observed: set[bytes] = set()  # the words of earlier observations (see offered())
        self.observed_to = 0
        self.line_names: dict[bytes, set[bytes]] = {}  # identifier -> names on its last line

    def observe(self, text: Any) -> None:
        """Remember the words of a text the agent saw (once, at most MAX_SCAN_CHARS of it)."""
        if not text:
            return
        if type(text) is not str:
            text = str(text)
        words = scan_words(text)
        self.seen.update(words)
        self.named.update(name_words(words))
        self.grounding.pending.append(text)
        if not self.informative_seen:
            self.unchecked.append(words)

    def offered(self) -> set[bytes]:
        """The words of earlier observations (what they offered), read only when a read needs
        them (the near-duplicate check): each text once more at most, so still linear."""
        observations = self.observations
        if self.observed_to < len(observations):
            for text in observations[self.observed_to :]:
                self.observed.update(scan_words(text))
            self.observed_to = len(observations)
        return self.observed

    def _seen(self) -> set[bytes]:
        """The words of earlier texts: the observations are read into them only when a step is
        checked against them (each once, together), so a trajectory's last reads and searches
        are never tokenised for nothing."""
        observations = self.observations
        if self.seen_to < len(observations):
            words = scan_texts(observations[self.seen_to :])
            self.seen_to = len(observations)
            self.seen.update(words)
            if not self.informative_seen:
                self.unchecked.append(words)
        return self.seen

    def _ground(self) -> None:
        """Hand the observations it has not seen yet to the answers' grounding."""
        observations = self.observations
        if self.grounded_to < len(observations):
            self.grounding.pending.extend(observations[self.grounded_to :])
            self.grounded_to = len(observations)

    def _informative_seen(self) -> bool:
        if not self.informative_seen:  # each text's words are checked once
            self.informative_seen = any(informative(w) for ws in self.unchecked for w in ws)
            self.unchecked.clear()
        return self.informative_seen

    def _near_miss(self, params: Mapping[str, Any], observation: str, why: Any) -> float:
        """The info use of a read step (the near-duplicate check), once the request names some."""
        chosen: set[bytes] = set()
        for word in scan_words("\n".join(param_leaves(params))):
            chosen.update(self.line_names.get(word, ()))
        if chosen:
            words = scan_words(observation)
            twin = near_miss_read(words, chosen, self.named, self.offered())
            if twin is not None:
                if why is not None:
                    got, wanted = twin[0].decode(), twin[1].decode()
                    why["info_use"] = (
                        f"reads {got!r}, a near-duplicate of {wanted!r} that the request "
                        f"names, though an earlier observation offered {wanted!r}"
                    )
                return NEAR_MISS_READ
        return 1.0

    def score(
        self,
        category: str,
        params: Mapping[str, Any],
        observation: Any,
        why: dict[str, str] | None,
    ) -> float:
        """The info use of one step; then remembers the words of its observation for the steps
        after it."""
        info_use = 1.0
        if type(observation) is not str:
            observation = str(observation or "")
        if category == "read":
            # a read is held to the near-duplicate check alone, which needs a name the request
            # states (those are among the words seen, so something was seen)
            if self.named:
                info_use = self._near_miss(params, observation, why)
        elif category == "submit":
            answer = answer_of(params) if self._seen() else None
            if answer is not None:
                self._ground()
                word = self.grounding.unaccounted(answer, "\n".join(param_leaves(params)))
                if word is not None:
                    info_use = ANSWER_UNGROUNDED
                    if why is not None:
                        why["info_use"] = f"the answer's {word!r} is in no earlier observation"
        elif (category == "write" or category == "execute") and self.acted:
            seen = self._seen() if self.seen_to < len(self.observations) else self.seen
            if seen and not uses_seen(params, seen) and self._informative_seen():
                info_use = INFO_UNUSED
                if why is not None:
                    why["info_use"] = "uses no path or identifier from earlier observations"
        self.acted = True
        if observation:  # it counts from the next step on (a text without a word adds nothing)
            self.observations.append(observation)
            if self.named:
                names_by_id(observation, self.line_names)
        return info_use


def non_redundancy(redundancy: float, regression: float) -> float:
    """``non_redundancy`` (the rubric): ``min(redundancy, regression)``: a step is as redundant
    as its worse part, a repeat or an undo."""
    return redundancy if redundancy < regression else regression


def rubric_value(scores: Mapping[str, float], rule: str) -> float:
    """The value of a rule-evaluated rubric scored by ``rule`` on a step with these rule
    ``scores``: the rule's score, times :data:`FAILED_FACTOR` when the call failed (``success``
    itself is not scaled)."""
    value = scores[rule]
    if scores["success"] < 1.0 and rule != "success":
        value *= FAILED_FACTOR
    return value


def trajectory_texts(trajectory: Any, *, messages: bool = True) -> list[tuple[int, str]]:
    """What the agent of ``trajectory`` (a Trajectory) saw besides observations, as
    ``(before_step, text)``: the task prompt before step 0, then each user or system message
    step before the tool step it precedes (:func:`~trainer_core.recording.schema.context_messages`)
    and each user or system turn of a 1.0 ``metadata["dialogue"]``. The ``context`` of
    :func:`step_rule_scores` (which is given the tool steps). ``messages=False``: the caller
    knows that no step is a message (the steps are not looked through for them)."""
    texts: list[tuple[int, str]] = []
    task = getattr(trajectory, "task", None)
    prompt = getattr(task, "prompt", None)
    if isinstance(prompt, str) and prompt:
        texts.append((0, prompt))
    if messages:
        texts += context_messages(getattr(trajectory, "steps", None) or ())
    metadata = getattr(trajectory, "metadata", None) or {}
    for turn in metadata.get("dialogue") or ():
        if isinstance(turn, Mapping) and turn.get("role") in ("user", "system"):
            content, before = turn.get("content"), turn.get("before_step")
            if isinstance(content, str) and content:
                texts.append((before if type(before) is int and before >= 0 else 0, content))
    return texts


# --- the pass ------------------------------------------------------------------------------------


def step_rule_scores(
    steps: Sequence[Any],
    ctx: RuleContext | None = None,
    *,
    reasons: list[dict[str, str]] | None = None,
    context: Sequence[tuple[int, str]] | None = None,
) -> list[dict[str, float]]:
    """Per step ``{"redundancy", "regression", "info_use", "success", "non_redundancy"}``, in one
    pass: :func:`step_rule_rows` as dicts (the arguments are its)."""
    return [
        {"redundancy": a, "regression": b, "info_use": c, "success": d, "non_redundancy": e}
        for a, b, c, d, e in step_rule_rows(steps, ctx, reasons=reasons, context=context)
    ]


def _before_step(item: tuple[int, str]) -> int:
    return item[0]


_NEVER = math.inf  # after every step


def step_rule_rows(
    steps: Sequence[Any],
    ctx: RuleContext | None = None,
    *,
    reasons: list[dict[str, str]] | None = None,
    context: Sequence[tuple[int, str]] | None = None,
) -> list[tuple[float, float, float, float, float]]:
    """Per step its scores in :data:`RULE_NAMES` order (redundancy, regression, info use,
    success, non_redundancy), in one pass.

    ``steps``: :class:`~trainer_core.recording.schema.Step` objects or dicts with ``tool``,
    ``params`` and ``observation`` (``output`` is accepted too), and optionally ``exit_code``
    and ``error``. ``ctx``: from :meth:`RuleContext.from_profile` (None: tools inferred from
    their names). ``reasons``: when a list is given, one dict per step is appended to it naming
    why a score is below 1.0 (for rationales; costs nothing when None). ``context``: texts the
    agent saw besides observations, ``(before_step, text)`` pairs (:func:`trajectory_texts`),
    for the info-use rule.

    Every check is a hash lookup; each text is tokenised once (at most MAX_SCAN_CHARS of it), so
    the cost is linear in the steps and their text. Score a rubric with :func:`rubric_value` (of
    the row as a dict).
    """
    ctx = ctx if ctx is not None else RuleContext()
    paths = ctx._paths
    if len(paths) >= ctx._PATHS_LIMIT:
        paths.clear()
    # each rule remembers the steps it has seen
    redundancy_of = RedundancyRule().score
    regression_of = RegressionRule().score
    info_use_rule = InfoUseRule()
    info_use_of = info_use_rule.score
    texts = sorted(context, key=_before_step) if context else ()
    next_text, n_texts = 0, len(texts)
    next_at = texts[0][0] if texts else _NEVER  # the step the next text comes before
    explain = reasons is not None
    out: list[tuple[float, float, float, float, float]] = []
    for index, step in enumerate(steps):
        if next_at <= index:
            while next_text < n_texts and texts[next_text][0] <= index:
                info_use_rule.observe(texts[next_text][1])
                next_text += 1
            next_at = texts[next_text][0] if next_text < n_texts else _NEVER
        name, category, params, target, file_scoped, observation = read_step(step, ctx, paths)
        why: dict[str, str] | None = {} if explain else None
        redundancy = redundancy_of(index, name, category, params, target, file_scoped, why)
        # only a write can undo one (RegressionRule scores every other step 1.0 at once)
        regression = regression_of(category, params, target, why) if category == "write" else 1.0
        info_use = info_use_of(category, params, observation, why)
        try:
            exit_code, error = step.exit_code, step.error
        except AttributeError:
            exit_code, error = read_status(step)
        failure = call_failure(exit_code, error, category, observation)
        if failure is not None and why is not None:
            why["success"] = failure
        out.append(
            (
                redundancy,
                regression,
                info_use,
                0.0 if failure is not None else 1.0,
                redundancy if redundancy < regression else regression,
            )
        )
        if why is not None:
            reasons.append(why)
    return out


# --- trajectory-level rules ----------------------------------------------------------------------


def efficiency(steps_count: int, reference_steps: int | float | None) -> float | None:
    """``min(1, reference_steps / steps_count)``; None when there is no reference (None or ≤ 0);
    0.0 for a trajectory with no steps (it did nothing)."""
    if reference_steps is None:
        return None
    try:
        reference = float(reference_steps)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(reference) or reference <= 0:
        return None
    if steps_count <= 0:
        return 0.0
    return min(1.0, reference / steps_count)
