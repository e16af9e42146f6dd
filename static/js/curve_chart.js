// Success (with its 95% interval) and mean reward against training step or iteration: reads the
// points of a json_script block (#curve-data) and redraws with uPlot after every htmx swap. The
// success rate and the mean reward each have their own axis. Every point is a link to its
// evaluation's episodes (static/js/point_links.js): a click or Tab and Enter opens them.
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
    if (window.SteplabPointLinks) {
      // every point opens its evaluation's episodes (the point's url)
      var links = window.SteplabPointLinks;
      opts.hooks = {
        ready: [function (u) {
          u.over.addEventListener("click", function (event) {
            var i = u.cursor.idx;
            if (i === null || i === undefined || event.target.closest(".point-link")) return;
            if (points[i] && points[i].url) window.location.href = points[i].url;
          });
        }],
        draw: [function (u) {
          links.attach(u, {
            url: function (i) { return points[i] && points[i].url; },
            label: function (i) {
              var p = points[i];
              return (p.label || "x " + p.step) + ": success " + (+p.success_rate).toFixed(3) +
                " (n " + p.n + "), open its episodes";
            },
          });
        }],
      };
    }
    chart = new uPlot(opts, data, box);
  }

  document.addEventListener("DOMContentLoaded", render);
  document.body.addEventListener("htmx:afterSwap", render);
})();
