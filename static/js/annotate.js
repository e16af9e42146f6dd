// The annotation page: keyboard-first labelling of steps, first-error marking, pairwise choice,
// Ctrl+Enter submit with the next item preloaded. Labels go to the server one at a time with
// the version the page last saw; a stale edit comes back 409 and is shown, never forced.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("annotate-config").textContent);
  var csrf = (JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"]) || "";
  var banner = document.getElementById("annotate-banner");
  var help = document.getElementById("annotate-help");
  var rows = Array.prototype.slice.call(document.querySelectorAll(".step-grid tr.step, .pair tr[data-kind]"));
  var current = -1;
  var choice = (document.getElementById("choice") || {}).textContent || "";
  var submissionVersion = config.submissionVersion;
  var busy = false;

  function show(message) {
    banner.textContent = message;
    banner.hidden = !message;
  }

  function post(url, data) {
    var body = new URLSearchParams();
    Object.keys(data).forEach(function (k) { if (data[k] !== null && data[k] !== undefined) body.append(k, data[k]); });
    return fetch(url, {
      method: "POST",
      headers: {"X-CSRFToken": csrf, "Content-Type": "application/x-www-form-urlencoded"},
      body: body,
      credentials: "same-origin",
    }).then(function (response) {
      return response.json().then(function (json) {
        if (!response.ok) { throw new Error(json.error || ("HTTP " + response.status)); }
        return json;
      });
    });
  }

  function render(row) {
    var cell = row.querySelector(".human-label");
    if (!cell) return;
    var value = row.dataset.value, neutral = row.dataset.neutral === "1", origin = row.dataset.origin;
    var text = "—";
    if (neutral) text = "neutral";
    else if (origin === "downstream") text = "downstream";
    else if (value !== "" && value !== undefined) text = Number(value).toFixed(2) + (origin === "first_error" ? " (first error)" : "");
    cell.textContent = text;
    row.classList.toggle("labelled", text !== "—");
  }

  function apply(label) {
    var row = rows.filter(function (r) { return Number(r.dataset.index) === label.index; })[0];
    if (!row) return;
    row.dataset.value = label.value === null ? "" : String(label.value);
    row.dataset.neutral = label.neutral ? "1" : "";
    row.dataset.origin = label.origin || "";
    row.dataset.version = String(label.version);
    render(row);
  }

  function focus(i) {
    if (!rows.length) return;
    current = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach(function (r, n) { r.classList.toggle("current", n === current); });
    rows[current].focus();
    rows[current].scrollIntoView({block: "nearest"});
  }

  function label(data) {
    if (current < 0) focus(0);
    var row = rows[current];
    data.index = row.dataset.index;
    data.version = row.dataset.version || "0";
    post(config.label, data).then(function (json) { show(""); apply(json); }).catch(function (e) { show(e.message); });
  }

  function firstError() {
    if (current < 0) focus(0);
    post(config.firstError, {index: rows[current].dataset.index}).then(function (json) {
      show("");
      json.labels.forEach(apply);
    }).catch(function (e) { show(e.message); });
  }

  function choose(c) {
    choice = c;
    document.getElementById("choice").textContent = c;
  }

  var next = null;
  function preload() {
    fetch(config.peek, {credentials: "same-origin"}).then(function (r) { return r.json(); }).then(function (json) {
      next = json.next;
      if (next) {
        var link = document.createElement("link");
        link.rel = "prefetch";
        link.href = next;
        document.head.appendChild(link);
      }
    }).catch(function () {});
  }

  function submit() {
    if (busy) return;
    busy = true;
    var form = document.getElementById("submit-form");
    var key = form.querySelector("[name=trajectory_key]");
    post(config.submit, {
      trajectory_key: key ? key.value : "",
      comment: form.querySelector("[name=comment]").value,
      choice: config.mode === "pairwise" ? (choice === "—" ? "" : choice) : "",
      version: submissionVersion || "",
    }).then(function (json) {
      window.location.assign(json.next);
    }).catch(function (e) { busy = false; show(e.message); });
  }

  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); submit(); }
      return;
    }
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); submit(); return; }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "?") { help.hidden = !help.hidden; return; }
    if (e.key === "j") { focus(current + 1); return; }
    if (e.key === "k") { focus(current - 1); return; }
    if (config.mode === "pairwise") {
      var k = e.key.toLowerCase();
      if (k === "a" || k === "b" || k === "e") { choose(k.toUpperCase()); }
      return;
    }
    if (/^[1-9]$/.test(e.key) && Number(e.key) <= config.scale) { label({key: e.key}); return; }
    if (e.key === "0") { label({neutral: "1"}); return; }
    if (e.key === "x") { label({clear: "1"}); return; }
    if (e.key === "f") { firstError(); return; }
  });

  document.addEventListener("click", function (e) {
    var action = e.target && e.target.getAttribute && e.target.getAttribute("data-action");
    if (action === "submit") submit();
    if (action === "help") help.hidden = !help.hidden;
  });

  rows.forEach(render);
  preload();
})();
