"""Tool categories from tool names: what the rule layer (:mod:`trainer_core.rewards.rules`)
makes of a tool the domain profile does not know (:func:`infer_category`; the rules' module doc
lists the names)."""

from __future__ import annotations

__all__ = ["infer_category"]

_EXACT_CATEGORY: dict[str, str] = {
    # read
    "read": "read", "read_file": "read", "cat": "read", "view": "read", "view_file": "read",
    "open": "read", "open_file": "read", "head": "read", "tail": "read", "less": "read",
    "ls": "read", "list_dir": "read", "list_files": "read", "list_directory": "read",
    "get_file": "read", "get_file_contents": "read", "webfetch": "read", "web_fetch": "read",
    "fetch": "read", "screenshot": "read", "read_notes": "read", "notebookread": "read",
    # search
    "grep": "search", "rg": "search", "search": "search", "find": "search", "glob": "search",
    "find_file": "search", "search_file": "search", "search_dir": "search",
    "search_files": "search", "websearch": "search", "web_search": "search",
    "lookup": "search", "query": "search",
    # write
    "edit": "write", "edit_file": "write", "write": "write", "write_file": "write",
    "multiedit": "write", "str_replace": "write", "str_replace_editor": "write",
    "str_replace_based_edit_tool": "write", "create": "write", "create_file": "write",
    "insert": "write", "apply_patch": "write", "patch": "write", "notebookedit": "write",
    "replace": "write", "append": "write",
    # execute
    "bash": "execute", "sh": "execute", "shell": "execute", "run": "execute",
    "execute": "execute", "execute_bash": "execute", "exec": "execute", "python": "execute",
    "run_ipython": "execute", "ipython": "execute", "terminal": "execute", "run_command": "execute",
    "cmd": "execute", "command": "execute", "task": "execute",
    # submit / think / navigate
    "submit": "submit", "finish": "submit", "done": "submit", "final_answer": "submit",
    "answer": "submit", "respond": "submit", "stop": "submit",
    "think": "think", "todowrite": "think", "todoread": "think", "plan": "think",
    "navigate": "navigate", "goto": "navigate", "open_url": "navigate", "browse": "navigate",
    "scroll": "navigate", "go_back": "navigate",
}  # fmt: skip

# words inside a tool name, checked in this order (the first category with a hit wins)
_WORD_CATEGORY: tuple[tuple[str, frozenset[str]], ...] = (
    ("submit", frozenset({"submit", "finish", "done"})),
    ("think", frozenset({"think", "todo", "reason"})),
    ("write", frozenset({"edit", "write", "replace", "create", "insert", "patch", "save"})),
    ("search", frozenset({"grep", "search", "find", "glob", "rg", "lookup", "query"})),
    ("read", frozenset({"read", "cat", "view", "open", "show", "list", "ls", "get", "fetch"})),
    ("execute", frozenset({"bash", "run", "execute", "exec", "python", "shell", "terminal"})),
    ("navigate", frozenset({"navigate", "goto", "browse", "url"})),
)


def _name_words(name: str) -> list[str]:
    """``str_replace_editor`` → str, replace, editor; ``WebFetch`` → web, fetch."""
    words: list[str] = []
    current = ""
    prev = ""
    for char in name:
        if not char.isalnum():
            if current:
                words.append(current.lower())
            current = ""
        elif char.isupper() and prev and (prev.islower() or prev.isdigit()):
            if current:
                words.append(current.lower())
            current = char
        else:
            current += char
        prev = char
    if current:
        words.append(current.lower())
    return words


def infer_category(name: str) -> str:
    """The category of a tool the profile does not know, from its name (see the module doc)."""
    key = name.strip().lower()
    if key in _EXACT_CATEGORY:
        return _EXACT_CATEGORY[key]
    words = set(_name_words(name))
    for category, vocabulary in _WORD_CATEGORY:
        if words & vocabulary:
            return category
    return "execute"
