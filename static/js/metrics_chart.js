// The job page's metrics chart: reads the series that the polled progress fragment carries
// (a json_script block) and redraws with uPlot after every htmx swap, without reloading.
(function () {
  "use strict";
  var chart = null;
  var names = [];
  var palette = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d"];

  function readSeries() {
    var el = document.getElementById("job-metrics-data");
    if (!el) return null;
    try { return JSON.parse(el.textContent); } catch (e) { return null; }
  }

  function render() {
    var box = document.getElementById("metrics-chart");
    var data = readSeries();
    if (!box || !data || !window.uPlot) return;
    var keys = Object.keys(data.series || {});
    var empty = document.getElementById("metrics-empty");
    box.setAttribute("data-points", String(data.steps.length));
    if (empty) empty.hidden = data.steps.length > 0;
    if (!data.steps.length) return;
    var columns = [data.steps].concat(keys.map(function (k) { return data.series[k]; }));
    if (chart && keys.join("|") === names.join("|")) {
      chart.setData(columns);
      return;
    }
    if (chart) chart.destroy();
    names = keys;
    var opts = {
      width: Math.max(320, box.clientWidth || 800),
      height: 260,
      scales: { x: { time: false } },
      axes: [{ label: "step" }, {}],
      series: [{ label: "step" }].concat(keys.map(function (k, i) {
        return { label: k, stroke: palette[i % palette.length], width: 2, spanGaps: true };
      })),
    };
    chart = new uPlot(opts, columns, box);
  }

  document.addEventListener("DOMContentLoaded", render);
  document.body.addEventListener("htmx:afterSwap", render);
  window.addEventListener("resize", function () {
    var box = document.getElementById("metrics-chart");
    if (chart && box) chart.setSize({ width: Math.max(320, box.clientWidth), height: 260 });
  });
})();
