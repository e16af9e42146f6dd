"""Domain profiles: built-ins, aliases and categories, loading from JSON / YAML, validation."""

from __future__ import annotations

import json

import pytest
import yaml

from trainer_core.envs.profiles import (
    BUILTIN_PROFILE_DATA,
    builtin_profiles,
    get_profile,
    load_profile,
)
from trainer_core.errors import ConfigError, InputError

EXPECTED_TOOLS = {
    "coding": {"read_file", "edit_file", "bash", "grep", "git", "submit", "finish", "think"},
    "browser": {
        "navigate",
        "click",
        "type_text",
        "scroll",
        "screenshot",
        "extract_text",
        "select",
        "wait",
        "submit",
    },
    "conversation": {
        "respond",
        "query_stats",
        "send_message",
        "delegate",
        "web_search",
        "create_note",
        "think",
    },
    "engineering": {"read_file", "grep", "git", "knowledge_base", "bash", "think"},
    "advisory": {"respond", "knowledge_base", "web_search", "create_note", "think"},
    "discussion": {"respond", "knowledge_base", "think"},
    "crew": {
        "respond",
        "read_notes",
        "write_notes",
        "web_search",
        "web_fetch",
        "bash",
        "delegate",
        "think",
    },
    "arithmetic": {"calculator", "submit"},
    "generic": set(),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_TOOLS))
def test_builtin_profiles_have_their_tools(name):
    profile = get_profile(name)
    assert EXPECTED_TOOLS[name] <= {t.name for t in profile.tools}
    assert profile.rubric_weights and sum(profile.rubric_weights.values()) > 0


def test_coding_weights_match_knowlyr_and_aliases_resolve_with_categories():
    coding = get_profile("coding")
    assert coding.rubric_weights == {
        "goal_progress": 0.30,
        "tool_selection": 0.20,
        "param_correctness": 0.20,
        "info_utilization": 0.15,
        "non_redundancy": 0.15,
    }
    assert coding.canonical_tool_name("Read") == "read_file"
    assert coding.canonical_tool_name("cat") == "read_file"
    assert (
        coding.canonical_tool_name("shell") == "bash"
        and coding.canonical_tool_name("RUN") == "bash"
    )
    assert coding.category_of("str_replace") == "write"
    assert coding.category_of("grep") == "search"
    assert coding.tool("edit_file").target_param == "file_path"
    assert get_profile("browser").tool("click").target_param == "element_id"
    assert get_profile("crew").tool("web_fetch").target_param == "url"
    assert coding.tool("no-such-tool") is None


def test_profiles_load_from_yaml_and_json_files_and_text(tmp_path):
    data = BUILTIN_PROFILE_DATA["discussion"]
    as_yaml = tmp_path / "p.yaml"
    as_yaml.write_text(yaml.safe_dump(data))
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps(data))
    assert load_profile(as_yaml) == load_profile(as_json) == builtin_profiles()["discussion"]
    assert load_profile(json.dumps(data)).name == "discussion"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["tools"][0].update(category="telepathy"), "tools.0.category"),
        (lambda d: d["tools"][1].update(aliases=[d["tools"][0]["name"]]), "is used by both"),
        (lambda d: d.update(rubric_weights={"a": -1.0}), "negative"),
        (lambda d: d.update(colour="blue"), "colour"),
    ],
)
def test_invalid_profiles_say_what_is_wrong(change, message):
    data = json.loads(json.dumps(BUILTIN_PROFILE_DATA["coding"]))
    change(data)
    with pytest.raises(InputError, match=message):
        load_profile(json.dumps(data))


def test_unknown_builtin_names_the_known_ones():
    with pytest.raises(ConfigError, match="built in: advisory, arithmetic"):
        get_profile("cooking")
