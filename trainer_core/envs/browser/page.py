"""What the agent sees of a page: a compact, accessibility-tree-like text (the BrowserGym /
WebArena convention), one element per line with the id actions take::

    URL: http://127.0.0.1:40211/search?category=Kettles
    Title: Products — Northwind Store
    [1] link 'Home'
    [2] link 'Cart (0)'
    [3] searchbox 'Search' value=''
    [4] button 'Search'
    [5] heading 'Kettles'
    [6] combobox 'Brand' value='All brands' options=['All brands', 'Norda', ...]
    [9] checkbox 'In stock only' checked=false
      [14] link 'Norda Arc Kettle'
      [15] StaticText '€24.99 · Norda · rating 4.3 · in stock'

A small script walks the DOM in the page and gives every interactive element (links, buttons,
form controls, elements with an interactive role), every heading, every image with a text
alternative and every run of text a ``data-steplab-id`` attribute (kept while the element lives;
new elements get the next number), skipping what is hidden. Names follow the accessible-name
rules in short (aria-label, aria-labelledby, a label, placeholder, title, the text inside).
List items, table rows, articles and forms indent what is inside them. The walk enters open
shadow roots (a slot shows what is assigned to it) and same-origin frames (their elements
indented under the frame's line, at most 20 frames); a cross-origin frame shows as its line
only, and a closed shadow root is not readable.

Long pages are cut at a character cap: the lines shown start at the first element in the
viewport, with a note of how many lines lie above and below (scroll to move the window).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: the script run in the page: returns [{id, depth, role, name, props, above, below}]
WALK_SCRIPT = r"""
() => {
  const SKIP = new Set(["SCRIPT","STYLE","NOSCRIPT","TEMPLATE","HEAD","META","LINK","svg","SVG"]);
  const INLINE = new Set(["SPAN","B","I","EM","STRONG","SMALL","CODE","ABBR","SUP","SUB","MARK",
    "S","U","TIME","DATA","BR","Q","CITE","DEL","INS","KBD","VAR","BDI","BDO","WBR"]);
  const GROUP = new Set(["LI","TR","ARTICLE","FORM","FIELDSET","DIALOG"]);
  const ROLES = new Set(["button","link","checkbox","radio","tab","menuitem","option","switch",
    "textbox","searchbox","combobox","slider","spinbutton","listbox"]);
  const clean = (s) => (s || "").replace(/\s+/g, " ").trim();
  let next = window.__steplabNext || 1;
  const out = [];
  const vh = window.innerHeight;
  const MAX_FRAMES = 20;
  let frames = 0;
  const idOf = (el) => {
    let id = el.getAttribute("data-steplab-id");
    if (!id) { id = String(next++); el.setAttribute("data-steplab-id", id); }
    return id;
  };
  const hidden = (el) => {
    if (el.hidden || el.getAttribute("aria-hidden") === "true") return true;
    const st = (el.ownerDocument.defaultView || window).getComputedStyle(el);
    return st.display === "none" || st.visibility === "hidden";
  };
  const roleOf = (el) => {
    const explicit = (el.getAttribute("role") || "").trim().split(/\s+/)[0];
    if (explicit && explicit !== "presentation" && explicit !== "none") return explicit;
    const tag = el.tagName;
    if (tag === "A") return el.hasAttribute("href") ? "link" : null;
    if (tag === "BUTTON" || tag === "SUMMARY") return "button";
    if (tag === "SELECT") return el.multiple ? "listbox" : "combobox";
    if (tag === "TEXTAREA") return "textbox";
    if (/^H[1-6]$/.test(tag)) return "heading";
    if (tag === "IMG") return clean(el.alt) ? "img" : null;
    if (tag === "IFRAME") return "iframe";
    if (tag !== "INPUT") return null;
    const type = (el.type || "text").toLowerCase();
    if (type === "hidden") return null;
    if (["button", "submit", "reset", "image"].includes(type)) return "button";
    return {checkbox: "checkbox", radio: "radio", search: "searchbox", range: "slider",
            number: "spinbutton"}[type] || "textbox";
  };
  const ownText = (label, control) => {
    let text = "";
    for (const node of label.childNodes) {
      if (node.nodeType === 3) text += node.textContent;
      else if (node.nodeType === 1 && node !== control &&
               !["SELECT","INPUT","TEXTAREA","BUTTON"].includes(node.tagName)) text += node.innerText;
    }
    return clean(text);
  };
  const nameOf = (el, role) => {
    const aria = clean(el.getAttribute("aria-label"));
    if (aria) return aria;
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const root = el.getRootNode();
      const t = clean(by.split(/\s+/).map((i) => root.getElementById?.(i)?.innerText || "").join(" "));
      if (t) return t;
    }
    if (el.labels && el.labels.length) {
      const t = clean(Array.from(el.labels).map((l) => ownText(l, el)).join(" "));
      if (t) return t;
    }
    if (el.tagName === "INPUT" && ["button","submit","reset"].includes(el.type))
      return clean(el.value) || (el.type === "submit" ? "Submit" : "");
    if (el.tagName === "IMG") return clean(el.alt);
    if (el.tagName === "IFRAME") return clean(el.title) || clean(el.src);
    if (["INPUT","TEXTAREA","SELECT"].includes(el.tagName))
      return clean(el.placeholder) || clean(el.title);
    const text = clean(el.innerText);
    if (text) return text;
    const img = el.querySelector("img[alt]");
    return (img && clean(img.alt)) || clean(el.title);
  };
  const propsOf = (el, role) => {
    const p = {};
    if (["textbox","searchbox","spinbutton","slider"].includes(role))
      p.value = el.type === "password" ? "*".repeat((el.value || "").length) : (el.value || "");
    if (role === "combobox" || role === "listbox") {
      const opts = Array.from(el.options || []);
      p.value = clean(opts.filter((o) => o.selected).map((o) => o.label).join(", "));
      p.options = opts.map((o) => clean(o.label));
    }
    if (role === "checkbox" || role === "radio" || role === "switch")
      p.checked = el.checked === undefined ? el.getAttribute("aria-checked") === "true" : el.checked;
    if (el.disabled || el.getAttribute("aria-disabled") === "true") p.disabled = true;
    return p;
  };
  const place = (el, dy) => {
    const r = el.getBoundingClientRect();
    return {above: r.bottom + dy <= 0, below: r.top + dy >= vh};
  };
  let dy = 0;  // the top of the frame being walked, in the page's viewport
  const emit = (el, depth, role, name, props) => {
    out.push({id: idOf(el), depth, role, name: name.slice(0, 300), props, ...place(el, dy)});
  };
  // what an element shows: its open shadow root's nodes (a slot: what is assigned to it)
  const kids = (el) => {
    if (el.shadowRoot) return el.shadowRoot.childNodes;
    if (el.tagName === "SLOT") {
      const assigned = el.assignedNodes({flatten: true});
      return assigned.length ? assigned : el.childNodes;
    }
    return el.childNodes;
  };
  // a same-origin frame's document (a cross-origin one cannot be read: its line only)
  const frameBody = (el) => {
    try { return el.contentDocument && el.contentDocument.body; } catch (e) { return null; }
  };
  const interactive = (el, role) =>
    ROLES.has(role) || el.hasAttribute("onclick") || el.isContentEditable && el.tagName !== "BODY";
  const inlineOnly = (el) => {
    for (const c of el.children) {
      if (!INLINE.has(c.tagName) || roleOf(c) || c.hasAttribute("onclick") || !inlineOnly(c)) return false;
    }
    return true;
  };
  const walk = (el, depth) => {
    if (SKIP.has(el.tagName) || hidden(el)) return;
    const role = roleOf(el);
    if (role === "iframe" || role === "img" || role === "heading" || interactive(el, role)) {
      emit(el, depth, role || "generic", nameOf(el, role), propsOf(el, role));
      const body = el.tagName === "IFRAME" || el.tagName === "FRAME" ? frameBody(el) : null;
      if (body && frames++ < MAX_FRAMES) {
        const outer = dy;
        dy += el.getBoundingClientRect().top;
        walk(body, depth + 1);
        dy = outer;
      }
      return;
    }
    if (el !== document.body && !el.shadowRoot && el.tagName !== "SLOT" && inlineOnly(el) &&
        clean(el.innerText)) {
      emit(el, depth, "StaticText", clean(el.innerText), {});
      return;
    }
    const inner = depth + (GROUP.has(el.tagName) ? 1 : 0);
    let text = "";
    const flush = () => { if (clean(text)) emit(el, inner, "StaticText", clean(text), {}); text = ""; };
    for (const node of kids(el)) {
      if (node.nodeType === 3) { if (el.tagName !== "LABEL" || !el.control) text += node.textContent; }
      else if (node.nodeType === 1) {
        if (INLINE.has(node.tagName) && !roleOf(node) && inlineOnly(node) && !hidden(node))
          text += " " + node.innerText + " ";
        else { flush(); walk(node, inner); }
      }
    }
    flush();
  };
  if (document.body) walk(document.body, 0);
  window.__steplabNext = next;
  return out;
}
"""

ID_RE = re.compile(r"^\s*\[?\s*(\d+)\s*\]?\s*$")
DESCRIPTION_RE = re.compile(r"""^\s*\[?(?:\d+\]\s*)?([A-Za-z]+)\s+(['"])(.*)\2\s*$""", re.DOTALL)
MAX_OPTIONS = 25


def _props_text(props: Mapping[str, Any]) -> str:
    parts = []
    if "value" in props:
        parts.append(f"value={str(props['value'])[:200]!r}")
    if "options" in props:
        options = list(props["options"])
        shown = options[:MAX_OPTIONS]
        more = f", ... {len(options) - len(shown)} more" if len(options) > len(shown) else ""
        parts.append("options=[" + ", ".join(repr(o) for o in shown) + more + "]")
    if "checked" in props:
        parts.append(f"checked={'true' if props['checked'] else 'false'}")
    if props.get("disabled"):
        parts.append("disabled")
    return (" " + " ".join(parts)) if parts else ""


def element_line(element: Mapping[str, Any]) -> str:
    indent = "  " * int(element.get("depth", 0))
    return (
        f"{indent}[{element['id']}] {element['role']} {element['name']!r}"
        f"{_props_text(element.get('props') or {})}"
    )


def render(url: str, title: str, elements: Sequence[Mapping[str, Any]], *, cap: int) -> str:
    """The observation text: URL, title and the element lines, cut to about ``cap`` characters
    from the first element in the viewport (with notes of what is left out)."""
    lines = [element_line(e) for e in elements]
    head = f"URL: {url}\nTitle: {title}"
    if not lines:
        return head + "\n(the page shows no text and no controls)"
    if sum(len(line) + 1 for line in lines) <= cap:
        return head + "\n" + "\n".join(lines)
    start = next((i for i, e in enumerate(elements) if not e.get("above")), len(lines) - 1)
    shown, size = [], 0
    for line in lines[start:]:
        if size + len(line) + 1 > cap and shown:
            break
        shown.append(line[:cap])
        size += len(line) + 1
    above, below = start, len(lines) - start - len(shown)
    notes = []
    if above:
        notes.append(f"({above} lines above, not shown: scroll up)")
    body = notes + shown
    if below:
        body.append(
            f"({below} lines below, not shown: scroll down; the page is cut at {cap} characters)"
        )
    return head + "\n" + "\n".join(body)


def resolve(target: Any, elements: Sequence[Mapping[str, Any]]) -> tuple[str | None, str]:
    """The id ``target`` names — an id (``12``, ``"[12]"``) or a role and name as the observation
    prints them (``"link 'Cart (2)'"``) — and an error message when it names none or several."""
    text = str(target)
    if m := ID_RE.match(text):
        return m.group(1), ""
    m = DESCRIPTION_RE.match(text)
    if not m:
        return None, (
            f"{text!r} is not an element: give the id in brackets from the observation (12), or "
            "its role and name as shown (link 'Cart')"
        )
    role, name = m.group(1), m.group(3)
    found = [e for e in elements if e["role"] == role and e["name"] == name]
    if not found:
        key = (role.lower(), " ".join(name.split()).casefold())
        found = [
            e
            for e in elements
            if (e["role"].lower(), " ".join(e["name"].split()).casefold()) == key
        ]
    if len(found) == 1:
        return str(found[0]["id"]), ""
    if not found:
        return None, f"no {role} named {name!r} on this page"
    ids = ", ".join(f"[{e['id']}]" for e in found[:10])
    return None, f"{len(found)} elements are {role} {name!r} ({ids}); give the id"
