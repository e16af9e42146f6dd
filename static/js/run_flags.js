// Reward-hacking flags on a training run's page (issue 21). The flags list arrives through htmx
// (templates/training/partials/flags.html) with a json_script block #run-flags-data:
// {"max_step": N, "url": "/training/flags/0/", "flags": [{id, kind, metric, start, end, review}]}.
// This draws (1) a strip under the list: one link per flag over its window of steps, to the
// flag's page (its samples, its queue); (2) where the page has the RL reward curve
// (#rl-curve-chart, drawn by rl_chart.js) or the training run's step curve (#metrics-chart,
// metrics_chart.js), the same windows shaded on the chart, redrawn after
// every htmx swap (the chart is redrawn then). The charts' own scripts are not touched.
(function () {
  "use strict";

  function readFlags() {
    var el = document.getElementById("run-flags-data");
    if (!el) return null;
    try { return JSON.parse(el.textContent); } catch (e) { return null; }
  }

  // the curves a run page may have: the RL run's reward curve, the training run's metrics curve
  var CHARTS = [["rl-curve-chart", "rl-curve-data"], ["metrics-chart", "job-metrics-data"]];

  function curve() {
    for (var i = 0; i < CHARTS.length; i++) {
      if (document.getElementById(CHARTS[i][0])) return CHARTS[i];
    }
    return null;
  }

  function curveSteps() {
    var which = curve();
    var el = which && document.getElementById(which[1]);
    if (!el) return null;
    try {
      var steps = JSON.parse(el.textContent).steps || [];
      return steps.length ? [Math.min.apply(null, steps), Math.max.apply(null, steps)] : null;
    } catch (e) { return null; }
  }

  function label(f) { return f.kind + (f.metric ? " · " + f.metric : "") + " (steps " + f.start + "–" + f.end + ")"; }

  function flagUrl(data, id) { return (data.url || "").replace(/\/0\/$/, "/" + id + "/"); }

  function drawStrip(data) {
    var strip = document.getElementById("run-flags-strip");
    if (!strip) return;
    strip.textContent = "";
    var flags = data.flags || [];
    strip.hidden = flags.length === 0;
    var range = curveSteps() || [0, Math.max(1, data.max_step || 0)];
    var span = Math.max(1, range[1] - range[0]);
    flags.forEach(function (f) {
      var a = document.createElement("a");
      a.className = "flag-mark" + (f.review ? " reviewed-" + f.review : "");
      a.href = flagUrl(data, f.id);
      a.title = label(f);
      a.textContent = f.kind;
      a.setAttribute("data-testid", "flag-marker");
      a.setAttribute("data-flag", String(f.id));
      var left = Math.max(0, (f.start - range[0]) / span);
      var right = Math.min(1, (f.end - range[0]) / span);
      a.style.left = (left * 100).toFixed(2) + "%";
      a.style.width = (Math.max(0.01, right - left) * 100).toFixed(2) + "%";
      strip.appendChild(a);
    });
  }

  function drawBands(data) {
    var which = curve();
    var over = which && document.querySelector("#" + which[0] + " .u-over");
    var range = curveSteps();
    if (!over || !range) return;
    Array.prototype.forEach.call(over.querySelectorAll(".flag-band"), function (b) { b.remove(); });
    var span = Math.max(1, range[1] - range[0]);
    var width = over.clientWidth;
    (data.flags || []).forEach(function (f) {
      var band = document.createElement("div");
      band.className = "flag-band";
      band.setAttribute("data-flag", String(f.id));
      var left = Math.max(0, (f.start - range[0]) / span) * width;
      var right = Math.min(1, (f.end - range[0]) / span) * width;
      band.style.left = left.toFixed(1) + "px";
      band.style.width = Math.max(2, right - left).toFixed(1) + "px";
      over.appendChild(band);
    });
  }

  function draw() {
    var data = readFlags();
    if (!data) return;
    drawStrip(data);
    drawBands(data);
  }

  document.addEventListener("htmx:afterSettle", function () { window.setTimeout(draw, 0); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
