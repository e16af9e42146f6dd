"""The HTML the trajectory pages repeat once per row: the list's rows and filter menus, the
trajectory page's steps, the diff's rows (the templates say where each goes, through
``templatetags/trajectory_html.py``).

Built here rather than in the templates for their cost: the template engine spends several µs
on every node and variable, and these rows made thousands of them (a diff's first screen about
4,000 nodes); rendering was 55-70% of these pages' CPU time (bench/page_cpu.py --profile).
``format_html`` is not much cheaper (it checks every argument for lazy strings); plain string
building with ``html.escape`` costs about a tenth of the template.

Escaping, the one rule of this module: every value a row shows goes through ``_text`` (what
``{{ value }}`` prints, escaped), ``_int`` (an integer the database gave) or ``escape``, inside
the f-string that places it — agents, LLMs and imported logs wrote most of it. Markup is only
ever literal text of this module, and ``mark_safe`` is applied once, to a finished fragment
(tests/webapp/trajectories/test_fragments.py puts markup in every field).
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

from django.conf import settings
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.formats import localize
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.timezone import template_localtime

from webapp.common.templatetags.steplab import pretty_json

_MARK = 987_654_321  # an integer that no URL of ours holds otherwise


def _url_format(name: str, arity: int) -> str:
    """``reverse(name)`` as a ``str.format`` pattern of its ``arity`` integer arguments
    (``{0}``, ``{1}``): reversed once per fragment instead of once per row."""
    marks = [str(_MARK + n) for n in range(arity)]
    url = reverse(name, args=marks).replace("{", "{{").replace("}", "}}")
    for n, mark in enumerate(marks):
        url = url.replace(mark, f"{{{n}}}")
    return url


def _text(value: Any, *, l10n: bool = True) -> str:
    """What ``{{ value }}`` prints, escaped: a string as it is; anything else as the template
    engine writes it (local time, numbers localized unless ``l10n`` is False)."""
    kind = type(value)
    if kind is not str:
        if kind is int and not settings.USE_THOUSAND_SEPARATOR:
            return str(value)  # what localize gives an int without grouping, 40x cheaper
        value = str(localize(template_localtime(value), use_l10n=None if l10n else False))
    return escape(value)


def _int(value: int) -> str:
    """An integer column (an id, an index, a count): digits only, as in ids and URLs."""
    return str(int(value))


def _truncated(text: str, length: int) -> str:
    """``text|truncatechars:length`` (Truncator normalizes to NFC, which ASCII already is)."""
    if len(text) <= length and text.isascii():
        return text
    return Truncator(text).chars(length)


def _get(mapping: Any, key: str) -> Any:
    """``{{ mapping.key }}`` of a stored JSON value: None unless it is an object."""
    return mapping.get(key) if isinstance(mapping, dict) else None


def _tokens(step) -> str:
    if not (step.tokens_in or step.tokens_out):
        return ""
    return (
        f'<span class="muted">{_text(step.tokens_in or 0)}→{_text(step.tokens_out or 0)} '
        "tokens</span>"
    )


# --- the list ------------------------------------------------------------------------------------

_OUTCOME = {
    None: '<span class="muted">unknown</span>',
    True: '<span class="badge status-succeeded">success</span>',
    False: '<span class="badge status-failed">failure</span>',
}


def trajectory_rows(rows: Iterable) -> SafeString:
    """The rows of the trajectory list's table, one ``<tr>`` per trajectory."""
    detail = _url_format("trajectories:detail", 1)
    return mark_safe("".join(_trajectory_row(t, detail) for t in rows))  # noqa: S308 - escaped


def _trajectory_row(t, detail: str) -> str:
    pk = _int(t.pk)
    model = f" · {_text(t.model)}" if t.model else ""
    fmt = f' <span class="muted">{_text(t.source_format)}</span>' if t.source_format else ""
    tags = "".join(f'<span class="chip">{_text(tag)}</span>' for tag in t.tags)
    created = template_localtime(t.created_at)
    when = (
        f"{created.year:04d}-{created.month:02d}-{created.day:02d} "
        f"{created.hour:02d}:{created.minute:02d}"
        if created is not None
        else ""
    )
    task = escape(_truncated(t.task_ref or t.prompt, 60))
    return (
        f'\n        <tr data-trajectory-id="{pk}">'
        f'\n          <td><input type="checkbox" name="selected" value="{pk}" '
        f'aria-label="select {pk}"></td>'
        f'\n          <td><a href="{escape(detail.format(pk))}">{pk}</a></td>'
        f'\n          <td class="truncate" title="{_text(t.prompt)}">{task}</td>'
        f"\n          <td>{_text(t.agent or '—')}{model}</td>"
        f"\n          <td>{_text(t.source)}{fmt}</td>"
        f"\n          <td>{_text(t.status)}</td>"
        f"\n          <td>{_OUTCOME[None if t.success is None else bool(t.success)]}</td>"
        f"\n          <td>{'—' if t.reward is None else _text(t.reward)}{_gdi(t)}</td>"
        f"\n          <td>{_text(t.step_count)}</td>"
        f"\n          <td>{tags}</td>"
        f"\n          <td>{when}</td>"
        "\n        </tr>"
    )


def _gdi(t) -> str:
    """The GDI after the reward, on the rows of the GDI sort (a ListRow's ``gdi``; docs/gdi.md)."""
    value = getattr(t, "gdi", None)
    if not isinstance(value, float):
        return ""
    return f' <span class="muted" data-testid="gdi">GDI {value:.3f}</span>'


def choice_menu(name: str, label: str, values: list[dict], chosen: str) -> SafeString:
    """A filter menu: "any <label>", then every value with its number of trajectories."""
    name, label = escape(name), escape(label)
    options = "".join(
        f'<option value="{_text(v["value"])}" {"selected" if v["value"] == chosen else ""}>'
        f"{_text(v['value'])} ({_text(v['count'])})</option>"
        for v in values
    )
    return mark_safe(  # noqa: S308 - every value escaped above
        f'<select name="{name}" aria-label="{label}" data-testid="filter-{name}">'
        f'<option value="">any {label}</option>{options}</select>'
    )


# --- a trajectory's steps -----------------------------------------------------------------------


def step_items(steps: Iterable, branch: bool = False) -> SafeString:
    """The ``<li>`` of each step on a trajectory's page (a tool call, or a dialogue turn); with
    ``branch`` (an operator), a "Branch from here" link on each of the agent's turns."""
    observation = _url_format("trajectories:observation", 2)
    branch_url = _url_format("rollouts:branch_new", 2) if branch else ""
    return mark_safe(  # noqa: S308 - every value escaped in the step builders
        "".join(
            _message_step(step, branch_url)
            if step.kind == "message"
            else _tool_step(step, observation, branch_url)
            for step in steps
        )
    )


def _branch_link(step, branch_url: str) -> str:
    """The "Branch from here" link (docs/branching.md): restore the environment at this step and
    sample continuations; the form says why when this trajectory cannot be branched."""
    if not branch_url:
        return ""
    url = escape(branch_url.format(_int(step.trajectory_id), _int(step.index)))
    return (
        f' <a class="branch-link" href="{url}" data-testid="branch-from-here">Branch from here</a>'
    )


def _thought(step) -> str:
    return f'<p class="thought">{_text(step.thought)}</p>' if step.thought else ""


def _not_captured(step) -> str:
    """A chip on a step whose content the agent's telemetry did not record (OpenTelemetry with
    content capture off: ``metadata["content_captured"]`` False)."""
    if _get(step.metadata, "content_captured") is not False:
        return ""
    return (
        '<span class="chip" data-testid="content-not-captured" title="The agent\'s '
        "OpenTelemetry instrumentation did not record this step's content (docs/api.md)\">"
        "content not captured</span>"
    )


def _tool_step(step, observation_url: str, branch_url: str = "") -> str:
    index = _int(step.index)
    exit_code = (
        f'<span class="chip">exit {_text(step.exit_code)}</span>'
        if step.exit_code is not None
        else ""
    )
    error = (
        f'<span class="badge status-failed">{escape(_truncated(step.error, 60))}</span>'
        if step.error
        else ""
    )
    duration = (
        f'<span class="muted">{escape(floatformat(step.duration, 3))}s</span>'
        if step.duration is not None
        else ""
    )
    params = f'<pre class="params">{escape(pretty_json(step.params))}</pre>' if step.params else ""
    return (
        f'\n    <li class="step" id="step-{index}" tabindex="-1" data-index="{index}">'
        f'\n      <div class="step-head"><strong>{index}</strong> <code>{_text(step.tool)}</code>'
        f"\n        {exit_code}\n        {error}\n        {duration}\n        {_tokens(step)}"
        f"{_not_captured(step)}{_branch_link(step, branch_url)}"
        "\n      </div>"
        f"\n      {_thought(step)}"
        f"\n      {params}"
        f"\n      {_observation(step, observation_url)}"
        f"{_screenshot(step)}"
        f'\n      <div class="step-scores" id="scores-step-{index}"></div>'
        "\n    </li>"
    )


def _screenshot(step) -> str:
    """A thumbnail of the step's screenshot (``metadata.screenshot``), the full size on click;
    the file is served only from the data directory (``selectors.step_screenshot``)."""
    if not isinstance(_get(step.metadata, "screenshot"), str):
        return ""
    url = escape(
        _url_format("trajectories:screenshot", 2).format(_int(step.trajectory_id), _int(step.index))
    )
    return (
        f'\n      <a class="screenshot" href="{url}" target="_blank" rel="noopener" '
        f'data-testid="screenshot"><img src="{url}" loading="lazy" width="240" '
        f'alt="The page after step {_int(step.index)}"></a>'
    )


def step_observation(step) -> SafeString:
    """A tool step's observation: its preview and a link to the rest when it was cut
    (``step.cut``), else all of it."""
    url = _url_format("trajectories:observation", 2)
    return mark_safe(_observation(step, url))  # noqa: S308 - escaped in _observation


def _observation(step, observation_url: str) -> str:
    target = f"obs-{_int(step.trajectory_id)}-{_int(step.index)}"
    if not getattr(step, "cut", False):
        return (
            f'\n      <div class="observation" id="{target}">'
            f"\n          <pre>{_text(step.observation)}</pre>\n      </div>"
        )
    url = escape(observation_url.format(_int(step.trajectory_id), _int(step.index)))
    return (
        f'\n      <div class="observation" id="{target}">'
        f"\n          <pre>{_text(step.preview)}</pre>"
        f'\n          <a href="{url}" hx-get="{url}" hx-target="#{target}" hx-swap="outerHTML">'
        f"show all {_observation_length(step)} characters</a>"
        "\n      </div>"
    )


def _observation_length(step) -> int:
    """The observation's length: read beside its head (``trajectory_steps_chunk``), or
    counted."""
    length = getattr(step, "observation_length", None)
    return int(length) if length is not None else len(step.observation)


def _message_step(step, branch_url: str = "") -> str:
    index, role = _int(step.index), _text(step.role)
    demo, source_role = _get(step.metadata, "is_demo"), _get(step.metadata, "source_role")
    chip = (
        '<span class="chip">demonstration</span>'
        if demo
        else f'<span class="chip">{_text(source_role)}</span>'
        if source_role
        else ""
    )
    if step.role == "system":
        text = (
            '<details class="message-text"><summary>System message · '
            f"{len(step.text)} characters</summary>"
            f'<div class="message-body" data-testid="message-text">{_text(step.text)}</div>'
            "</details>"
        )
    else:
        text = (
            '<div class="message-body" data-testid="message-text">'
            f"{_text(step.text or '(empty)')}</div>"
        )
    scores = (
        f'<div class="step-scores" id="scores-step-{index}"></div>'
        if step.role == "assistant"
        else ""
    )
    return (
        f'\n    <li class="step message role-{role}" id="step-{index}" tabindex="-1" '
        f'data-index="{index}" data-kind="message" data-role="{role}">'
        f'\n      <div class="step-head"><strong>{index}</strong> '
        f'<span class="badge role-{role}">{role}</span>'
        f"\n        {chip}\n        {_tokens(step)}{_not_captured(step)}"
        f"{_branch_link(step, branch_url) if step.role == 'assistant' else ''}"
        "\n      </div>"
        f"\n      {_thought(step)}"
        f"\n      {text}"
        f"\n      {scores}"
        "\n    </li>"
    )


# --- the diff ------------------------------------------------------------------------------------

_DETAIL_ROW = '<tr class="diff-detail"><td></td><td colspan="2">{}</td></tr>'
#: The first divergence's row: its class, id and badge.
_FIRST = (
    " first-divergence",
    'id="first-divergence"',
    ' <span class="badge status-failed">first divergence</span>',
)


def diff_rows(rows: Iterable[dict], left, right, scored_by) -> SafeString:
    """The aligned rows of a diff (``selectors.diff_context``): the two steps side by side, then
    what differs (parameters, the observations' text diff or a link to it, the step rewards)."""
    urls = {
        "detail": _url_format("trajectories:detail", 1),
        "observation": _url_format("trajectories:observation", 2),
        "diff_step": reverse("trajectories:diff_step"),
    }
    by = f' <span class="muted">({_text(scored_by.label)})</span>' if scored_by else ""
    return mark_safe(  # noqa: S308 - every value escaped in the row builders
        "".join(_diff_row(row, left, right, by, urls) for row in rows)
    )


def _diff_row(row: dict, left, right, scored_by: str, urls: dict[str, str]) -> str:
    kind, first = _text(row["kind"]), row["first"]
    first_class, first_id, first_badge = _FIRST if first else ("", "", "")
    parts = [
        f'\n      <tr class="diff-{kind}{first_class}" data-kind="{kind}" {first_id}>'
        f"\n        <td>{_int(row['position'])}{first_badge}</td>"
        f"\n        <td>{_diff_cell(row['left'], row, urls)}</td>"
        f"\n        <td>{_diff_cell(row['right'], row, urls)}</td>"
        "\n      </tr>",
        _param_changes(row["params"]) if row["params"] else "",
        (
            _DETAIL_ROW.format(_text_diff(row["observation"], row["observation_level"]))
            if row["observation"]
            else ""
        ),
        _deferred(row, left, right, urls) if row["observation_deferred"] else "",
        _reward_delta(row["reward_delta"], scored_by) if row["reward_delta"] else "",
    ]
    return "\n      ".join(parts) + "\n    "


def _diff_cell(step, row: dict, urls: dict[str, str]) -> str:
    """One side of a diff row: a tool call, or a message (its role and text); long bodies are
    cut, the rest loads on demand. Without the body when the row shows the text diff."""
    if not step:
        return '<span class="muted">(no step)</span>'
    index, with_body = _int(step.index), not row["observation"]
    if step.kind == "message":
        role, body = _text(step.role), ""
        if with_body:
            body = f'<pre class="message">{_text(step.text_preview)}</pre>'
            if step.text_cut:
                url = escape(urls["detail"].format(_int(step.trajectory_id)))
                body += f'<a href="{url}#step-{index}">the whole message</a>'
        return (
            f'<strong>{index}</strong> <span class="badge role-{role}" '
            f'data-testid="diff-message">{role}</span>{body}'
        )
    body = ""
    if with_body:
        target = f"obs-{_int(step.trajectory_id)}-{index}"
        link = ""
        if step.cut:
            url = escape(urls["observation"].format(_int(step.trajectory_id), index))
            link = (
                f'<a href="{url}" hx-get="{url}" hx-target="#{target}" hx-swap="outerHTML">'
                f"show all {_int(step.observation_length)} characters</a>"
            )
        body = (
            f'<div class="observation" id="{target}"><pre>{_text(step.preview)}</pre>{link}</div>'
        )
    return (
        f"<strong>{index}</strong> <code>{_text(step.tool)}</code>"
        f'<pre class="params">{escape(pretty_json(step.params))}</pre>{body}'
    )


def _param_changes(changes: list[tuple]) -> str:
    listed = "; ".join(
        f"<code>{_text(key, l10n=False)}</code>: <del>{_text(a, l10n=False)}</del> → "
        f"<ins>{_text(b, l10n=False)}</ins>"
        for key, a, b in changes
    )
    return _DETAIL_ROW.format(f"Changed parameters: {listed}")


def _deferred(row: dict, left, right, urls: dict[str, str]) -> str:
    url = escape(
        f"{urls['diff_step']}?a={_int(left.pk)}&b={_int(right.pk)}"
        f"&left={_int(row['left'].index)}&right={_int(row['right'].index)}"
    )
    what = "The messages differ." if row["kind"] == "changed_text" else "The observations differ."
    return (
        '<tr class="diff-detail"><td></td><td colspan="2" data-testid="textdiff-deferred">'
        f'<span class="muted">{what}</span> <a href="{url}" hx-get="{url}" '
        'hx-target="closest td">Show the differences</a></td></tr>'
    )


def _reward_delta(delta: float, scored_by: str) -> str:
    return _DETAIL_ROW.format(
        "Step reward difference: "
        f'<span data-testid="reward-delta">{escape(floatformat(delta, 3))}</span>{scored_by}'
    )


_TEXT_DIFF_LEVEL = {
    "line": '<p class="muted">Differences by line (word by word would cost too much here).</p>',
    "block": (
        '<p class="muted">The changed part as one block (finer differences would cost too much '
        "here).</p>"
    ),
}


def text_diff(observation: list[tuple[str, str]], level: str) -> SafeString:
    """The word-level differences of two texts (``(op, text)`` pieces), insertions and deletions
    marked, with a note when they are by line or one block."""
    return mark_safe(_text_diff(observation, level))  # noqa: S308 - escaped in _text_diff


def _text_diff(observation: list[tuple[str, str]], level: str) -> str:
    pieces = "".join(
        f"<ins>{escape(text)}</ins>"
        if op == "insert"
        else f"<del>{escape(text)}</del>"
        if op == "delete"
        else escape(text)
        for op, text in observation
    )
    return f'{_TEXT_DIFF_LEVEL.get(level, "")}<pre class="textdiff" data-testid="textdiff">{pieces}</pre>'
