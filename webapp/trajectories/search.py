"""Search over trajectories: the words of a query, quoted phrases, ``-`` to exclude and ``or``
between alternatives (the syntax of PostgreSQL's ``websearch_to_tsquery``).

* PostgreSQL matches the GIN-indexed search document of each trajectory (built by
  :data:`SEARCH_DOCUMENT`: its prompt, and every step's message text, thought, tool, the string
  and number values of its parameters and the head of its observation); a quoted phrase is a
  phrase query.
* SQLite has no such index: each word or phrase is a case-insensitive substring (LIKE) of the
  prompt or of one step's message text, thought, tool, observation or a parameter's value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, Exists, F, Func, OuterRef, Q, QuerySet, Value

#: PostgreSQL: the search document of the trajectories ``t`` (an UPDATE's target). A parameter
#: value holding a "/" appears twice, the second time with "/" as a space, so a file name inside
#: a path matches (a value without one would only repeat itself: the parser's cost is the
#: document's length).
SEARCH_DOCUMENT = """
to_tsvector('simple'::regconfig, left(
  coalesce(t.prompt, '') || ' ' || coalesce((
    SELECT string_agg(concat_ws(' ', s.text, s.thought, s.tool, p.text, p.split,
                                left(coalesce(s.observation, ''), 1000)), ' ' ORDER BY s.index)
    FROM trajectories_step s
    LEFT JOIN LATERAL (
      SELECT string_agg(x.value, ' ') AS text,
             string_agg(translate(x.value, '/', ' '), ' ')
               FILTER (WHERE strpos(x.value, '/') > 0) AS split
      FROM jsonb_path_query(s.params, 'strict $.**') AS v,
           LATERAL (SELECT v #>> '{}' AS value) AS x
      WHERE jsonb_typeof(v) IN ('string', 'number')
    ) p ON true
    WHERE s.trajectory_id = t.id), ''), 300000))
"""


@dataclass(frozen=True)
class Term:
    text: str
    negated: bool = False


_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')


def parse(query: str) -> list[list[Term]]:
    """The alternatives of ``query`` (separated by a bare ``or``), each the terms that must all
    match: quoted phrases (an unclosed quote runs to the end) and words; a leading ``-`` excludes."""
    groups: list[list[Term]] = [[]]
    for match in _TOKEN.finditer(query):
        minus, phrase, word = match.groups()
        if word is not None:
            if word.lower() == "or":
                if groups[-1]:
                    groups.append([])
                continue
            negated = word.startswith("-") and len(word) > 1
            text = word[1:] if negated else word
            text = text.replace('"', "")
        else:
            negated, text = bool(minus), " ".join(phrase.split())
        if text:
            groups[-1].append(Term(text, negated))
    return [group for group in groups if group]


class _JsonValueLike(Func):
    """SQLite: does a string or number anywhere inside the JSON column match the LIKE pattern?"""

    output_field = BooleanField()

    def as_sql(self, compiler, connection, **extra):
        column, column_params = compiler.compile(self.source_expressions[0])
        pattern, pattern_params = compiler.compile(self.source_expressions[1])
        sql = (
            f"EXISTS (SELECT 1 FROM json_tree({column}) AS j "
            f"WHERE j.type IN ('text', 'integer', 'real') AND j.atom LIKE {pattern} ESCAPE '\\')"
        )
        return sql, [*column_params, *pattern_params]


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _matches(term: Term, steps: QuerySet) -> Q:
    """SQLite: the trajectory's prompt or one of its steps contains the term."""
    in_step = steps.filter(
        Q(text__icontains=term.text)
        | Q(thought__icontains=term.text)
        | Q(tool__icontains=term.text)
        | Q(observation__icontains=term.text)
        | Q(_JsonValueLike(F("params"), Value(_like_pattern(term.text))))
    )
    found = Q(prompt__icontains=term.text) | Q(Exists(in_step))
    return ~found if term.negated else found


def search(qs: QuerySet, query: str, *, steps: QuerySet) -> QuerySet:
    """The trajectories of ``qs`` that ``query`` finds; ``steps``: the Step rows (SQLite)."""
    if connection.vendor == "postgresql":
        return qs.extra(
            where=["search_vector @@ websearch_to_tsquery('simple'::regconfig, %s)"],
            params=[query],
        )
    groups = parse(query)
    if not groups:
        return qs
    related = steps.filter(trajectory=OuterRef("pk"))
    condition = Q()
    for group in groups:
        both = Q()
        for term in group:
            both &= _matches(term, related)
        condition |= both
    return qs.filter(condition)
