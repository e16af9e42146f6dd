"""Domain profiles: the tools of a domain (with categories, target parameters and aliases), its
outcome spec, task fields and default rubric weights. Loadable from JSON or YAML; the web app
stores them versioned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trainer_core.errors import ConfigError, InputError, describe_validation_error

Category = Literal["read", "write", "search", "execute", "navigate", "submit", "think"]
CATEGORIES: tuple[str, ...] = ("read", "write", "search", "execute", "navigate", "submit", "think")


class ToolDef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    category: Category
    description: str = ""
    target_param: str | None = Field(
        None, description="The parameter naming what the tool acts on: file_path, url, element_id."
    )
    aliases: list[str] = Field(
        default_factory=list, description="Other names agents use for it (Read, cat...)."
    )
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class OutcomeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    success_field: str = Field("success", description="The outcome field that means success.")
    score_field: str | None = Field(
        None, description="A score field (with total_field: score/total)."
    )
    total_field: str | None = None
    partial_credit_field: str | None = Field(
        "partial_credit", description="A 0..1 partial-credit field, used first."
    )


class DomainProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., pattern=r"^[a-z][a-z0-9_-]*$")
    version: int = Field(1, ge=1)
    description: str = ""
    tools: list[ToolDef] = Field(default_factory=list)
    outcome: OutcomeSpec = Field(default_factory=OutcomeSpec)
    task_fields: list[str] = Field(default_factory=lambda: ["prompt"])
    rubric_weights: dict[str, float] = Field(default_factory=dict)

    @field_validator("rubric_weights")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        for key, weight in value.items():
            if weight < 0:
                raise ValueError(f"rubric weight {key!r} is negative")
        if value and sum(value.values()) <= 0:
            raise ValueError("rubric weights must not all be zero")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> DomainProfile:
        owner: dict[str, str] = {}
        for tool in self.tools:
            for name in [tool.name, *tool.aliases]:
                key = name.lower()
                if owner.setdefault(key, tool.name) != tool.name:
                    raise ValueError(
                        f"name {name!r} is used by both {owner[key]!r} and {tool.name!r}"
                    )
        return self

    # --- lookups -------------------------------------------------------------------------------

    def tool(self, name: str) -> ToolDef | None:
        """The tool called ``name`` or one of its aliases (case-insensitive)."""
        key = name.strip().lower()
        for tool in self.tools:
            if tool.name.lower() == key or key in (a.lower() for a in tool.aliases):
                return tool
        return None

    def canonical_tool_name(self, name: str) -> str:
        tool = self.tool(name)
        return tool.name if tool else name

    def category_of(self, name: str) -> str | None:
        tool = self.tool(name)
        return tool.category if tool else None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def profile_from_data(data: dict[str, Any]) -> DomainProfile:
    try:
        return DomainProfile.model_validate(data)
    except ValidationError as exc:
        problems = describe_validation_error(exc, whole="profile")
        raise InputError(f"invalid domain profile: {problems}") from None


def load_profile(path_or_text: str | Path) -> DomainProfile:
    """A profile from a .json / .yaml / .yml file, or from JSON or YAML text."""
    import yaml

    from trainer_core import safeparse

    path = Path(path_or_text) if not str(path_or_text).lstrip().startswith(("{", "name:")) else None
    if path is not None and path.exists():
        text = path.read_text()
        is_json = path.suffix == ".json"
    else:
        text = str(path_or_text)
        is_json = text.lstrip().startswith("{")
    try:
        data = safeparse.load_json(text) if is_json else safeparse.load_yaml(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"cannot parse the profile: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(
            "a domain profile is a mapping with name, tools, outcome, task_fields, rubric_weights"
        )
    return profile_from_data(data)


# --- built-in profiles -------------------------------------------------------------------------


def _obj(**props: tuple[str, str]) -> dict[str, Any]:
    """JSON-schema object; a property name ending in '?' is optional."""
    properties, required = {}, []
    for raw, (typ, desc) in props.items():
        name = raw.rstrip("_")
        optional = raw.endswith("_")
        if typ == "string[]":
            properties[name] = {"type": "array", "items": {"type": "string"}, "description": desc}
        else:
            properties[name] = {"type": typ, "description": desc}
        if not optional:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _t(name, category, description, parameters=None, target=None, aliases=()):
    return {
        "name": name,
        "category": category,
        "description": description,
        "parameters": parameters or {"type": "object", "properties": {}},
        "target_param": target,
        "aliases": list(aliases),
    }


T = {
    "read_file": _t(
        "read_file",
        "read",
        "Read a file (optionally a range of lines).",
        _obj(
            file_path=("string", "path relative to the workspace"),
            start_line_=("integer", "first line, 1-based"),
            end_line_=("integer", "last line, inclusive"),
        ),
        "file_path",
        ["Read", "cat", "view", "open_file"],
    ),
    "write_file": _t(
        "write_file",
        "write",
        "Create or overwrite a file.",
        _obj(
            file_path=("string", "path relative to the workspace"),
            content=("string", "the whole new content"),
        ),
        "file_path",
        ["Write", "create_file"],
    ),
    "edit_file": _t(
        "edit_file",
        "write",
        "Replace one unique occurrence of old_string with new_string.",
        _obj(
            file_path=("string", "path relative to the workspace"),
            old_string=("string", "text to replace; must occur exactly once"),
            new_string=("string", "replacement text"),
        ),
        "file_path",
        ["Edit", "str_replace", "str_replace_editor", "replace"],
    ),
    "bash": _t(
        "bash",
        "execute",
        "Run a shell command in the workspace.",
        _obj(command=("string", "the command"), timeout_=("number", "seconds")),
        None,
        ["shell", "run", "Bash", "execute", "terminal"],
    ),
    "grep": _t(
        "grep",
        "search",
        "Search files for a pattern.",
        _obj(
            pattern=("string", "regular expression"),
            path_=("string", "file or directory"),
            ignore_case_=("boolean", "case-insensitive"),
        ),
        "path",
        ["Grep", "search", "rg", "search_files"],
    ),
    "list_dir": _t(
        "list_dir",
        "read",
        "List a directory.",
        _obj(path_=("string", "directory, default the workspace")),
        "path",
        ["ls", "LS", "list_files"],
    ),
    "git": _t(
        "git",
        "execute",
        "Run git with the given arguments.",
        _obj(args=("string[]", "arguments after 'git'")),
        None,
        ["Git"],
    ),
    "submit": _t(
        "submit",
        "submit",
        "Submit the work (or the answer) and end the episode.",
        _obj(answer_=("string", "the final answer, when there is one")),
        None,
        ["Submit", "submit_answer"],
    ),
    "finish": _t(
        "finish",
        "submit",
        "Finish the episode.",
        _obj(answer_=("string", "the final answer, when there is one")),
        None,
        ["done", "Finish", "stop"],
    ),
    "think": _t(
        "think",
        "think",
        "Think out loud; changes nothing.",
        _obj(thought=("string", "the thought")),
        None,
        ["Think", "reason"],
    ),
    "navigate": _t(
        "navigate",
        "navigate",
        "Open a URL.",
        _obj(url=("string", "the URL")),
        "url",
        ["goto", "open_url", "browse"],
    ),
    "click": _t(
        "click",
        "execute",
        "Click an element.",
        _obj(element_id=("string", "the element: its id in the observation, e.g. 12")),
        "element_id",
        ["Click"],
    ),
    "type_text": _t(
        "type_text",
        "write",
        "Type text into an element (replacing what it holds).",
        _obj(
            element_id=("string", "the element"),
            text=("string", "what to type"),
            press_enter_=("boolean", "press Enter afterwards (submits a search box's form)"),
        ),
        "element_id",
        ["type", "fill"],
    ),
    "go_back": _t(
        "go_back",
        "navigate",
        "Go back to the previous page.",
        None,
        None,
        ["back", "goBack", "navigate_back"],
    ),
    "scroll": _t(
        "scroll",
        "navigate",
        "Scroll the page.",
        _obj(direction=("string", "up or down")),
        None,
        ["Scroll"],
    ),
    "screenshot": _t(
        "screenshot", "read", "Take a screenshot of the page.", None, None, ["Screenshot"]
    ),
    "extract_text": _t(
        "extract_text",
        "read",
        "Extract the text of an element or the page.",
        _obj(element_id_=("string", "the element; the whole page without it")),
        "element_id",
        ["get_text", "read"],
    ),
    "select": _t(
        "select",
        "write",
        "Select an option.",
        _obj(element_id=("string", "the element"), value=("string", "the option")),
        "element_id",
        ["select_option"],
    ),
    "wait": _t(
        "wait",
        "think",
        "Wait for the page.",
        _obj(seconds_=("number", "how long")),
        None,
        ["sleep"],
    ),
    "respond": _t(
        "respond",
        "submit",
        "Give the final answer to the user and end the episode.",
        _obj(message=("string", "the answer")),
        None,
        ["reply", "answer", "final_answer"],
    ),
    "query_stats": _t(
        "query_stats",
        "search",
        "Query the statistics table.",
        _obj(query=("string", "what to look up")),
        None,
        ["stats", "lookup_stats"],
    ),
    "send_message": _t(
        "send_message",
        "write",
        "Send a message to someone.",
        _obj(to=("string", "recipient"), message=("string", "the message")),
        "to",
        ["message"],
    ),
    "delegate": _t(
        "delegate",
        "execute",
        "Hand a subtask to another agent.",
        _obj(agent=("string", "who"), task=("string", "what")),
        "agent",
        ["handoff"],
    ),
    "web_search": _t(
        "web_search",
        "search",
        "Search the web.",
        _obj(query=("string", "the query")),
        None,
        ["search_web", "WebSearch"],
    ),
    "web_fetch": _t(
        "web_fetch",
        "read",
        "Fetch a web page.",
        _obj(url=("string", "the URL")),
        "url",
        ["fetch", "WebFetch"],
    ),
    "create_note": _t(
        "create_note",
        "write",
        "Write a note.",
        _obj(title=("string", "title"), content=("string", "text")),
        "title",
        ["note"],
    ),
    "read_notes": _t("read_notes", "read", "Read the shared notes.", None, None, ["notes"]),
    "write_notes": _t(
        "write_notes",
        "write",
        "Add to the shared notes.",
        _obj(content=("string", "text")),
        None,
        [],
    ),
    "knowledge_base": _t(
        "knowledge_base",
        "search",
        "Search the knowledge base.",
        _obj(query=("string", "what to look up")),
        None,
        ["kb", "search_kb", "lookup"],
    ),
    "calculator": _t(
        "calculator",
        "execute",
        "Evaluate an arithmetic expression (+ - * / // % ** and parentheses).",
        _obj(expression=("string", "e.g. (17 + 5) * 3")),
        None,
        ["calc", "calculate"],
    ),
}

CODING_WEIGHTS = {
    "goal_progress": 0.30,
    "tool_selection": 0.20,
    "param_correctness": 0.20,
    "info_utilization": 0.15,
    "non_redundancy": 0.15,
}
CONVERSATION_WEIGHTS = {
    "goal_progress": 0.25,
    "tool_selection": 0.15,
    "param_correctness": 0.15,
    "info_utilization": 0.15,
    "non_redundancy": 0.10,
    "response_quality": 0.20,
}
ENGINEERING_WEIGHTS = {
    "goal_progress": 0.30,
    "tool_selection": 0.15,
    "param_correctness": 0.15,
    "info_utilization": 0.20,
    "non_redundancy": 0.10,
    "evidence_quality": 0.10,
}
ADVISORY_WEIGHTS = {
    "goal_progress": 0.25,
    "tool_selection": 0.10,
    "param_correctness": 0.10,
    "info_utilization": 0.20,
    "non_redundancy": 0.10,
    "advice_quality": 0.25,
}
DISCUSSION_WEIGHTS = {
    "goal_progress": 0.25,
    "tool_selection": 0.10,
    "param_correctness": 0.10,
    "info_utilization": 0.20,
    "non_redundancy": 0.10,
    "argument_quality": 0.25,
}


def _profile(
    name: str,
    description: str,
    tools: list[str],
    weights: dict[str, float],
    task_fields: list[str],
    outcome: dict | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "version": 1,
        "description": description,
        "tools": [T[t] for t in tools],
        "outcome": outcome or {},
        "task_fields": task_fields,
        "rubric_weights": weights,
    }


BUILTIN_PROFILE_DATA: dict[str, dict[str, Any]] = {
    "coding": _profile(
        "coding",
        "Fix bugs and add features in a repository; hidden tests decide.",
        [
            "read_file",
            "edit_file",
            "write_file",
            "bash",
            "grep",
            "list_dir",
            "git",
            "submit",
            "finish",
            "think",
        ],
        CODING_WEIGHTS,
        ["prompt", "files", "repo", "setup", "test_command", "reference_solution"],
        {
            "success_field": "success",
            "score_field": "tests_passed",
            "total_field": "tests_total",
            "partial_credit_field": "partial_credit",
        },
    ),
    # steplab/browser offers navigate, click, type_text, select, scroll, go_back, extract_text
    # and submit; element_id is an id of the observation ([12]) or a role and name (link 'Cart')
    "browser": _profile(
        "browser",
        "Operate a web page: the observation lists its elements with ids ([12] link 'Cart'); "
        "navigate, click, type, select, scroll, go back and read, then submit.",
        [
            "navigate",
            "click",
            "type_text",
            "scroll",
            "screenshot",
            "extract_text",
            "select",
            "wait",
            "go_back",
            "submit",
        ],
        CODING_WEIGHTS,
        ["prompt", "expected_answer", "metadata"],
    ),
    "conversation": _profile(
        "conversation",
        "Answer a user with tools; the answer is checked.",
        [
            "respond",
            "query_stats",
            "send_message",
            "delegate",
            "web_search",
            "create_note",
            "think",
        ],
        CONVERSATION_WEIGHTS,
        ["prompt", "expected_answer", "checker", "metadata"],
    ),
    "engineering": _profile(
        "engineering",
        "Investigate a system with read-only tools and report.",
        ["read_file", "grep", "git", "knowledge_base", "bash", "think", "respond"],
        ENGINEERING_WEIGHTS,
        ["prompt", "files", "expected_answer", "checker"],
    ),
    "advisory": _profile(
        "advisory",
        "Give advice grounded in a knowledge base.",
        ["respond", "knowledge_base", "web_search", "create_note", "think"],
        ADVISORY_WEIGHTS,
        ["prompt", "expected_answer", "checker", "metadata"],
    ),
    "discussion": _profile(
        "discussion",
        "Argue a position from a knowledge base.",
        ["respond", "knowledge_base", "think"],
        DISCUSSION_WEIGHTS,
        ["prompt", "expected_answer", "checker", "metadata"],
    ),
    "crew": _profile(
        "crew",
        "Work with other agents through shared notes.",
        [
            "respond",
            "read_notes",
            "write_notes",
            "web_search",
            "web_fetch",
            "bash",
            "delegate",
            "think",
        ],
        CONVERSATION_WEIGHTS,
        ["prompt", "expected_answer", "metadata"],
    ),
    "arithmetic": _profile(
        "arithmetic",
        "Compute with a calculator, then submit the number.",
        ["calculator", "submit"],
        CODING_WEIGHTS,
        ["prompt", "expected_answer"],
    ),
    "generic": _profile("generic", "No tools of its own.", [], CODING_WEIGHTS, ["prompt"]),
}

# --- lookup (steplab/lookup): multi-hop questions over a generated directory -----------------
# Reads: search (category search) and fetch (read, target: the record id); compute: calculate
# (execute, held to the info-use rule); submit. Using information means reusing in a later call
# what an earlier observation showed: a record id (P-4821, from a search or a reference in a
# fetched record), a name, or a number (a price or a population in a calculation, the answer).
LOOKUP_WEIGHTS = {
    "goal_progress": 0.30,
    "tool_selection": 0.10,
    "param_correctness": 0.20,
    "info_utilization": 0.25,
    "non_redundancy": 0.15,
}
BUILTIN_PROFILE_DATA["lookup"] = {
    "name": "lookup",
    "version": 1,
    "description": (
        "Answer a multi-hop question about a directory of people, companies, products and "
        "cities: search by name, fetch records by id and follow their references, calculate, "
        "submit. Near-duplicate names make the first fetch decisive. A step uses information "
        "when its parameters reuse an id, a name or a number an earlier observation showed."
    ),
    "tools": [
        _t(
            "search",
            "search",
            "Search the directory by name: the ids, kinds and names of matching records "
            "(near-duplicate spellings match too).",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "a name, e.g. Anna Berg"},
                    "kind": {
                        "type": "string",
                        "enum": ["person", "company", "product", "city"],
                        "description": "only records of this kind",
                    },
                },
                "required": ["query"],
            },
            None,
            ["find", "lookup", "search_directory"],
        ),
        _t(
            "fetch",
            "read",
            "Fetch one record by id: its fields, with the ids of the records it refers to.",
            _obj(id=("string", "a record id from a search or a reference, e.g. P-4821")),
            "id",
            ["get", "get_record", "open", "read_record"],
        ),
        _t(
            "calculate",
            "execute",
            "Evaluate an arithmetic expression (+ - * / // % ** and parentheses).",
            _obj(expression=("string", "e.g. 3 * 249")),
            None,
            ["calculator", "calc"],
        ),
        T["submit"],
    ],
    "outcome": {},
    "task_fields": ["prompt", "expected_answer", "checker", "metadata"],
    "rubric_weights": LOOKUP_WEIGHTS,
}

# --- customer service (steplab/customer-service): tau-bench style, in its own module ----------
from trainer_core.envs.service_profile import SERVICE_PROFILE_DATA  # noqa: E402

BUILTIN_PROFILE_DATA["customer-service"] = SERVICE_PROFILE_DATA

_BUILTIN_CACHE: dict[str, DomainProfile] = {}


def builtin_profiles() -> dict[str, DomainProfile]:
    if not _BUILTIN_CACHE:
        for name, data in BUILTIN_PROFILE_DATA.items():
            _BUILTIN_CACHE[name] = profile_from_data(data)
    return dict(_BUILTIN_CACHE)


def get_profile(name: str) -> DomainProfile:
    profiles = builtin_profiles()
    if name not in profiles:
        raise ConfigError(
            f"no built-in domain profile {name!r}; built in: {', '.join(sorted(profiles))}"
        )
    return profiles[name]
