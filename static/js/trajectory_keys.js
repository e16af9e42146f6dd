// The trajectory page: j / k move the focus to the next / previous step (not while typing).
(function () {
  var current = -1;
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.isContentEditable)) return;
    if (e.key !== "j" && e.key !== "k") return;
    var steps = Array.prototype.slice.call(document.querySelectorAll("li.step"));
    current = Math.max(0, Math.min(steps.length - 1, current + (e.key === "j" ? 1 : -1)));
    if (steps[current]) { steps[current].focus(); steps[current].scrollIntoView({block: "start"}); }
  });
})();
