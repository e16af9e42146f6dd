// Success (with its 95% interval) and mean reward against training step or iteration: reads the
// points of a json_script block (#curve-data) and redraws with uPlot after every htmx swap. The
// success rate and the mean reward each have their own axis.
(function () {
  "use strict";
  var chart = null;

  function render() {
    var box = document.getElementById("curve-chart");
    var el = document.getElementById("curve-data");
    if (!box || !el || !window.uPlot) return;
    var points;
    try { points = JSON.parse(el.textContent) || []; } catch (e) { return; }
    points = points.filter(function (p) { return p.success_rate !== null && p.success_rate !== undefined; });
    box.setAttribute("data-points", String(points.length));
    if (chart) { chart.destroy(); chart = null; }
    if (!points.length) return;
    var x = points.map(function (p) { return p.step; });
    var data = [
      x,
      points.map(function (p) { return p.success_rate; }),
      points.map(function (p) { return p.success_low; }),
      points.map(function (p) { return p.success_high; }),
      points.map(function (p) { return p.mean_reward; }),
    ];
    var opts = {
      width: Math.max(320, box.clientWidth || 800),
      height: 240,
      // success is a rate in [0, 1]; the mean reward has its own scale and axis (right)
      scales: { x: { time: false }, y: { range: [0, 1] }, reward: { auto: true } },
      axes: [
        { label: box.getAttribute("data-x-label") || "iteration / step" },
        { scale: "y", label: "success", stroke: "#2563eb" },
        { scale: "reward", label: "mean reward", side: 1, stroke: "#059669", grid: { show: false } },
      ],
      series: [
        { label: "x" },
        { label: "success", stroke: "#2563eb", width: 2, points: { show: true } },
        { label: "95% low", stroke: "#93c5fd", dash: [4, 4] },
        { label: "95% high", stroke: "#93c5fd", dash: [4, 4] },
        { label: "mean reward", scale: "reward", stroke: "#059669", width: 1, points: { show: true } },
      ],
    };
    chart = new uPlot(opts, data, box);
  }

  document.addEventListener("DOMContentLoaded", render);
  document.body.addEventListener("htmx:afterSwap", render);
})();
