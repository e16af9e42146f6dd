"""What the rule layer reads in a trajectory's texts: the words of a text and which of them are
identifiers or values, the values a step's parameters carry (nested ones too), the answer a
submit step states and whether the texts seen before account for it, and whether a tool call
failed — from its error field, its exit code or the words of its observation, whatever importer
wrote the step.

Everything here looks at one step or one text at a time and is linear in its length; the rules in
:mod:`trainer_core.rewards.rules` keep what they need across steps.

Words
    Runs of ``[A-Za-z0-9_.-]``, as bytes, read from at most :data:`MAX_SCAN_CHARS` of a text (its
    head and its tail), so ``src/app/loader.py`` gives ``src``, ``app`` and ``loader.py``.
Informative words (:func:`informative`)
    The identifiers and values an agent can take from what it saw: a word of 4+ characters that
    starts with a letter or ``_`` and contains ``_``, ``.`` or ``-`` (``load_config``,
    ``loader.py``, ``add-to-cart``), mixes case (``parseFile``) or mixes letters and digits
    (``HAT136``); a word of 4+ characters that starts with a digit and holds a letter
    (``4BMN53``, UUIDs); a number of two or more digits (``152``, ``2024-05-20``, ``12.5``; the
    digits 0–9 alone are too common to say anything).
Failed calls (:func:`call_failure`)
    In order: an ``error`` field (any importer's error kind or message); a non-zero exit code
    (except exit 1 of a search, grep's "no match", and the exit code of a submit, which is the
    hidden tests' — the outcome's business); with neither known, the observation's words: a
    head that opens with an error (``Error: ...``, ``Traceback (most recent call last)``,
    ``Unknown tool``, ``Invalid parameters``, ``fatal:``, ``usage:``, an editor's "Your proposed
    edit has introduced new syntax error(s)" or "No exact match found"), ``command not found`` or
    ``No such file or directory`` in the head, an exit code printed in the tail (``[exit code
    1]``, ``exit status 2``, ``returncode 1``) and, for an execute step, a last line naming a
    Python exception (``ValueError: ...``) or failed tests (``2 failed``). An explicit exit code
    0 wins over the words (``cat error.log`` succeeds).
Near-duplicate reads (:func:`near_miss_read`)
    A read opened the twin of what the request asks about when its observation shows a name
    (a capitalised word of 4+ letters) a letter or two from a name the prompt or a user turn
    states (edit distance 1, or 2 for names of 7+ letters, same first letter), and not that
    name; an earlier observation offered both spellings; and the read's identifier was last
    seen on a line naming the near-duplicate (``P-7735 | person | Zsofia Cellik``). A record
    reached by following a reference (``employer: CO-4912``) is never such a pick.
Answers (:func:`answer_of`, :class:`Grounding`)
    A submit step's answer is the last ``<answer>...</answer>`` in its parameters, else its
    ``answer`` parameter. It is accounted for when each of its words is: a number found in an
    earlier text, or the sum, difference, product or quotient of two such numbers that the step
    itself writes out (``47 + 29 = 76``), or ``a`` give or take ``b`` percent — numbers so
    derived in the step's working count as operands too (``10 x 12 = 120, minus 40 percent =
    72``); a word of 3+ letters (stop words aside) found in an earlier text, case-insensitively.
    Single digits, short words and stop words say nothing either way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_SCAN_CHARS",
    "Grounding",
    "answer_of",
    "call_failure",
    "informative",
    "name_words",
    "names_by_id",
    "near_miss_read",
    "param_leaves",
    "scan_texts",
    "scan_words",
    "uses_seen",
]

#: how much of one text is read for words (half from the head, half from the tail)
MAX_SCAN_CHARS = 8192
_HALF_SCAN = MAX_SCAN_CHARS // 2
#: how many parameter values of one step are read, and how deep into nested values
_MAX_LEAVES = 256
_MAX_DEPTH = 8

_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
#: bytes.translate table: every byte that cannot be in a word becomes a space
_TO_WORDS = bytes((c if c in _WORD_BYTES else 32) for c in range(256))
_LETTER_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset(b"0123456789")
#: single bytes, looked for in a word as ints (``95 in word`` is a byte scan; ``b"_" in word``
#: costs several times more)
_UNDERSCORE, _DOT, _DASH = b"_"[0], b"."[0], b"-"[0]


def scan_words(text: str) -> list[bytes]:
    """The words of ``text`` (runs of ``[A-Za-z0-9_.-]``), at most MAX_SCAN_CHARS of it."""
    if len(text) > MAX_SCAN_CHARS:
        text = text[:_HALF_SCAN] + " " + text[-_HALF_SCAN:]
    return text.encode("utf-8", "ignore").translate(_TO_WORDS).split()


def scan_texts(texts: list[str]) -> list[bytes]:
    """The words of each of ``texts`` (as :func:`scan_words` reads each), in one list."""
    if len(texts) == 1:
        return scan_words(texts[0])
    if max(map(len, texts), default=0) <= MAX_SCAN_CHARS:  # as a rule: none is cut
        text = " ".join(texts)
    else:
        text = " ".join(
            t if len(t) <= MAX_SCAN_CHARS else t[:_HALF_SCAN] + " " + t[-_HALF_SCAN:] for t in texts
        )
    return text.encode("utf-8", "ignore").translate(_TO_WORDS).split()


def informative(word: bytes) -> bool:
    """A path, identifier or value (see the module doc)."""
    size = len(word)
    if size < 2:
        return False
    if word[0] in _LETTER_START:
        if size < 4:
            return False
        if _UNDERSCORE in word or _DOT in word or _DASH in word:
            return True
        if word.isalpha():  # mixed case: parseFile, ConfigLoader (not Hello, HELLO, hello)
            return not (word.islower() or word.isupper() or word.istitle())
        return True  # letters and digits: HAT136, utf8
    if word.isdigit():
        return True  # two or more digits
    digits = sum(1 for c in word if c in _DIGITS)
    if digits == 0:
        return False
    if digits == len(word.translate(None, b".-")):  # a number: 12.5, -42, 2024-05-20
        return digits >= 2
    return size >= 4  # a digit-led identifier: 4BMN53, a UUID


def param_leaves(params: Mapping[str, Any]) -> list[str]:
    """The values in ``params`` as text, nested dicts and lists included (numbers as text, booleans
    and None left out), at most 256 of them, 8 levels deep."""
    leaves = [value for value in params.values() if type(value) is str]
    if len(leaves) == len(params):  # the common case: flat string parameters
        return leaves
    leaves = []
    nested: list[tuple[Any, int]] = []
    for value in params.values():
        kind = type(value)
        if kind is str:
            leaves.append(value)
        elif kind is int or kind is float:
            leaves.append(repr(value))
        elif kind is not bool and value is not None:
            nested.append((value, 1))
    if nested:
        _nested_leaves(nested[::-1], leaves)
    return leaves


def _nested_leaves(stack: list[tuple[Any, int]], leaves: list[str]) -> None:
    """Walk the nested values on ``stack`` depth first, appending their leaves to ``leaves``."""
    while stack and len(leaves) < _MAX_LEAVES:
        value, depth = stack.pop()
        kind = type(value)
        if kind is str:
            leaves.append(value)
        elif kind is int or kind is float:
            leaves.append(repr(value))
        elif depth < _MAX_DEPTH:
            if isinstance(value, Mapping):
                stack.extend((v, depth + 1) for v in reversed(list(value.values())))
            elif isinstance(value, list | tuple):
                stack.extend((v, depth + 1) for v in reversed(value))


def _matches(word: bytes, seen: set[bytes]) -> bool:
    """``word`` (informative) is in ``seen`` in another spelling: as a number written with or
    without ``.0`` or a sign (``255`` / ``255.0``, ``6594`` / ``-6594``), or as a dotted name's
    tail (``self.load_file`` uses ``load_file``). (A word seen at the end of a sentence,
    ``loader.py.``, is checked first by :func:`uses_seen`.)"""
    if word.isdigit():
        return word + b".0" in seen or b"-" + word in seen
    if word.endswith(b".0") and word[:-2].isdigit():
        return word[:-2] in seen
    tail = word
    while _DOT in tail:
        tail = tail.split(b".", 1)[1]
        if tail in seen and informative(tail):
            return True
    return False


def _whole_value_seen(leaves: list[str], words: list[bytes], seen: set[bytes]) -> bool:
    """Some parameter value is made only of words seen before: a name (``Mia``), a cabin
    (``economy``), an expression from the prompt (``3 * 4``). Values of 2 characters or less,
    and one-word values of 2 characters or less, do not count. ``words``: the words of all the
    values (those of the only value, when there is one)."""
    for leaf in leaves:
        if 3 <= len(leaf) <= 200:
            if len(leaves) > 1:
                words = leaf.encode("utf-8", "ignore").translate(_TO_WORDS).split()
            if words and (len(words) > 1 or len(words[0]) > 2) and seen.issuperset(words):
                return True
    return False


def uses_seen(params: Mapping[str, Any], seen: set[bytes]) -> bool:
    """Whether the parameters use an informative word of ``seen`` (the words of earlier texts),
    in any spelling :func:`_matches` knows, or a whole value made of seen words."""
    leaves = param_leaves(params)
    if not leaves:
        return False
    words = scan_words(leaves[0] if len(leaves) == 1 else "\n".join(leaves))
    for word in words:  # one pass: the first informative word seen in any spelling will do
        if word.islower() and word.isalpha():
            continue  # a plain lower-case word (``return``, ``path``) is never informative
        if word in seen or word + b"." in seen:
            if informative(word):
                return True
        elif (_DOT in word or word[-1] in _DIGITS) and informative(word) and _matches(word, seen):
            return True
    return _whole_value_seen(leaves, words, seen)


# --- near-duplicate records ---------------------------------------------------------------------


def name_words(words: list[bytes]) -> set[bytes]:
    """The proper names among ``words``: capitalised words of 4+ letters (``Celik``,
    ``Brenholm``), the names a request states."""
    return {w for w in words if w.istitle() and len(w) >= 4 and w.isalpha()}


def _near(a: bytes, b: bytes) -> bool:
    """``a`` and ``b`` (different) are a letter or two apart: edit distance 1, or 2 when both
    have 7+ letters, and the same first letter (Celik / Cellik, Hansen / Hanson)."""
    if a[:1] != b[:1] or abs(len(a) - len(b)) > 2:
        return False
    limit = 2 if min(len(a), len(b)) >= 7 else 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


def names_by_id(text: str, into: dict[bytes, set[bytes]]) -> None:
    """Remember, for each identifier in ``text`` (at most MAX_SCAN_CHARS of it), the names on its
    line (``P-7735 | person | Zsofia Cellik``: P-7735 → {Zsofia, Cellik}); a later line naming
    the identifier replaces an earlier one."""
    if len(text) > MAX_SCAN_CHARS:
        text = text[:_HALF_SCAN] + "\n" + text[-_HALF_SCAN:]
    for line in text.splitlines():
        words = line.encode("utf-8", "ignore").translate(_TO_WORDS).split()
        names = name_words(words)
        for word in words:
            if informative(word) and not word.isalpha():
                into[word] = names


def near_miss_read(
    words: list[bytes], chosen: set[bytes], named: set[bytes], offered: set[bytes]
) -> tuple[bytes, bytes] | None:
    """``(got, wanted)`` when a read opened the near-duplicate of a name the request states
    (``named``): its observation (``words``) shows ``got``, a letter or two from ``wanted``,
    and not ``wanted``; an earlier observation offered both (``offered``: their words); and the
    line the read's identifier was last seen on named ``got`` (``chosen``: those lines' names)
    — asked about ``Celik``, shown ``P-7735 | Zsofia Cellik`` and ``P-8572 | Zsofia Celik``,
    it fetched P-7735. Following a reference (``employer: CO-6691``) is never such a pick."""
    if not named or not chosen:
        return None
    shown = set(words)
    missing = [n for n in named if n not in shown and n in offered]
    if not missing:
        return None
    for word in name_words(words).intersection(chosen).difference(named):
        if word in offered:
            for wanted in missing:
                if _near(word, wanted):
                    return word, wanted
    return None


# --- failed calls --------------------------------------------------------------------------------

_HEAD = 160  # characters of an observation searched for "command not found" and the like
_END = 48  # characters at its end searched for a printed exit code
_TAIL = 240  # characters of a command's output read for an exception or failed tests
_FAILED_HEADS = (
    "error:",
    "error ",
    "error(",
    "errors:",
    "exception:",
    "exception ",
    "traceback (most recent call last)",
    "unknown tool",
    "invalid parameters",
    "invalid action",
    "fatal:",
    "failed to ",
    "usage:",
    "your proposed edit has introduced new syntax error",
    "no exact match found",
)
_FAILED_INITIALS = frozenset("eEtTuUiIfFyYnN")  # the first letters of _FAILED_HEADS
_OPENERS = _FAILED_INITIALS | frozenset(" \t\r\n[")  # what such an observation starts with
_NOT_FOUND, _NO_SUCH_FILE = "command not found", "No such file or directory"  # in the head
_PRINTED_EXIT = re.compile(
    r"(?:exit code|exit status|exited with code|returncode|return code)\W{0,3}(-?\d+)",
    re.IGNORECASE,
)
_EXCEPTION_LINE = re.compile(r"(?:^|\n)\s*[A-Za-z_][\w.]*(?:Error|Exception)\b[^\n]*\s*$")
_TESTS_FAILED = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b")


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_failure(exit_code: Any, error: Any, category: str, observation: Any) -> str | None:
    """Why the call failed, in a few words, or None when the trajectory shows no failure (see the
    module doc for what counts)."""
    if error:
        return f"the call failed ({_short(str(error), 60)})"
    if category == "submit" or category == "think":
        return None
    if type(exit_code) is int:
        if exit_code == 0 or (exit_code == 1 and category == "search"):
            return None
        return f"exit code {exit_code}"
    if not observation:
        return None
    if type(observation) is not str:
        observation = str(observation)
    # the failure the observation reports in its own words. Cheap first: most observations open
    # with none of the error words, so only their first character is looked at before anything
    # else, and the other needles are searched for within the head and the tail
    if observation[0] in _OPENERS:  # an error opening starts here, or after blanks and a "["
        head = observation[:60].lstrip(" \t\r\n[")
        if head[:1] in _FAILED_INITIALS and head.lower().startswith(_FAILED_HEADS):
            return f"the observation reports an error: {_short(head, 60)}"
    head = observation[:_HEAD]
    if _NOT_FOUND in head or _NO_SUCH_FILE in head:
        needle = _NOT_FOUND if _NOT_FOUND in head else _NO_SUCH_FILE
        return f"the observation says {needle.lower()!r}"
    end = observation[-_END:]
    if "xit" in end or ("eturn" in end and ("eturncode" in end or "eturn code" in end)):
        printed = _PRINTED_EXIT.search(end)
        if printed and int(printed.group(1)) != 0:
            return f"exit code {printed.group(1)} (printed)"
    if category == "execute":
        tail = observation[-_TAIL:]
        if "Error" in tail or "Exception" in tail or "failed" in tail:
            if _EXCEPTION_LINE.search(tail):
                return "the command ended with an exception"
            if _TESTS_FAILED.search(tail):
                return "tests failed"
    return None


# --- answers -------------------------------------------------------------------------------------

_ANSWER_TAG = re.compile(r"<\s*answer\s*>(.*?)<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL)
_STOPWORDS = frozenset(
    b"the and for are was were with from that this these those its not but per each than then "
    b"into onto over under about there their they them has have had will would can could "
    b"should yes all any one two".split()
)


def answer_of(params: Mapping[str, Any]) -> str | None:
    """The answer a submit step states: the last ``<answer>`` tag in its parameter values, else
    its ``answer`` parameter (a string or a number); None when it states none."""
    tagged = None
    for leaf in param_leaves(params):
        if "<" in leaf:
            found = _ANSWER_TAG.findall(leaf)
            if found:
                tagged = found[-1]
    if tagged is not None:
        return tagged.strip()
    answer = params.get("answer")
    if type(answer) is str or type(answer) is int or type(answer) is float:
        return str(answer).strip()
    return None


def _number(word: bytes) -> float | None:
    """``word`` as a number (``12``, ``-3.5``, ``66.`` at a sentence's end), else None."""
    word = word.rstrip(b".")
    if not word or not (word[0] in _DIGITS or (len(word) > 1 and word[1] in _DIGITS)):
        return None
    try:
        return float(word)
    except ValueError:
        return None


def _key(value: float) -> float:
    """``value`` rounded so that the same number computed two ways compares equal."""
    return round(value, 6)


def _results(operands: list[float]) -> set[float]:
    """Every ``a + b``, ``a - b``, ``a * b``, ``a / b`` and ``a`` give or take ``b`` percent of
    two of ``operands`` (rounded by :func:`_key`)."""
    out: set[float] = set()
    for a in operands:
        for b in operands:
            out.update((a + b, a - b, a * b, a * b / 100, a * (1 - b / 100), a * (1 + b / 100)))
            if b:
                out.add(a / b)
    return {_key(v) for v in out}


class Grounding:
    """The words and numbers of the texts an agent saw, to check an answer against. Texts are
    kept as they come (:attr:`pending`, an append per text) and read into the lookups only when
    an answer is checked: each text is read once, so the work stays linear."""

    __slots__ = ("lower", "numbers", "pending")

    def __init__(self) -> None:
        self.pending: list[str] = []  # texts not read yet
        self.lower: set[bytes] = set()  # lower-cased words, sentence-final dots dropped
        self.numbers: set[float] = set()

    def _catch_up(self) -> None:
        for text in self.pending:
            for word in scan_words(text):
                self.lower.add(word.lower().rstrip(b"."))
                value = _number(word)
                if value is not None:
                    self.numbers.add(value)
        self.pending.clear()

    def _derivable(self, working: str) -> set[float]:
        """What the step's own working can derive: results of two numbers it writes out that
        earlier texts account for — those seen, then, in up to three rounds, those derived from
        them (``10 x 12 = 120, minus 40 percent = 72``). At most 12 of its numbers are used."""
        numbers = [n for n in (_number(w) for w in scan_words(working)) if n is not None][:12]
        accounted = [n for n in numbers if n in self.numbers]
        results = _results(accounted)
        for _ in range(3):
            more = [n for n in numbers if n not in accounted and _key(n) in results]
            if not more:
                break
            accounted.extend(more)
            results = _results(accounted)
        return results

    def unaccounted(self, answer: str, working: str) -> str | None:
        """The first word of ``answer`` that no earlier text accounts for (see the module doc),
        or None. ``working``: the step's own text, whose seen numbers may combine into the
        answer."""
        self._catch_up()
        derivable: set[float] | None = None
        for word in answer.encode("utf-8", "ignore").translate(_TO_WORDS).split():
            value = _number(word)
            if value is not None:
                if (abs(value) < 10 and value == int(value)) or value in self.numbers:
                    continue
                if derivable is None:
                    derivable = self._derivable(working)
                if _key(value) not in derivable:
                    return word.decode()
                continue
            key = word.lower().strip(b".-")
            if len(key) < 3 or key in _STOPWORDS or key in self.lower:
                continue
            return word.decode()
        return None
