// A decoupled RL run's curve: reward, success rate, mean staleness and groups dropped per step,
// read from the json_script block (#rl-curve-data) that the polled live part carries and redrawn
// with uPlot after every htmx swap. Each series kind has its own scale and axis (a success rate
// in [0, 1] is not flattened against a reward of 10, nor staleness against dropped counts).
// A click on the chart opens the groups the step under the cursor trained on and dropped: into
// #rl-step-groups through htmx, or the step's page without it. The steps table below the chart
// links every step too, and every point is a real link (static/js/point_links.js): Tab reaches it.
(function () {
  "use strict";
  var chart = null;
  var names = [];
  var COLORS = {
    reward: "#059669",
    success_rate: "#2563eb",
    staleness_mean: "#d97706",
    dropped: "#dc2626",
  };
  // steps and group counts are whole numbers: no tick at step 1.5
  var WHOLE = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
  var AXIS_LABELS = {
    reward: "reward",
    rate: "success rate",
    versions: "staleness (versions)",
    groups: "groups dropped",
  };

  function readData() {
    var el = document.getElementById("rl-curve-data");
    if (!el) return null;
    try { return JSON.parse(el.textContent); } catch (e) { return null; }
  }

  function stepUrl(box, step) {
    return window.SteplabPointLinks.stepUrl(box.getAttribute("data-step-url"), step);
  }

  // every point a real link to its step (keyboard: Tab), opened under the chart by htmx
  function linkPoints(box, u) {
    window.SteplabPointLinks.attach(u, {
      url: function (i) { return stepUrl(box, u.data[0][i]); },
      label: function (i) { return window.SteplabPointLinks.describe(u, i); },
      onOpen: function (i) {
        if (!window.htmx) return false;
        openStep(box, u.data[0][i]);
        return true;
      },
    });
  }

  function openStep(box, step) {
    var url = stepUrl(box, step);
    box.setAttribute("data-picked-step", String(step));
    if (window.htmx) {
      window.htmx.ajax("GET", url, { target: "#rl-step-groups", swap: "innerHTML" });
    } else {
      window.location.href = url;
    }
  }

  function options(box, data, keys) {
    var scales = { x: { time: false } };
    var axes = [{ label: "step", incrs: WHOLE }];
    var series = [{ label: "step" }];
    keys.forEach(function (key) {
      var scale = data.series[key].scale;
      var color = COLORS[key] || "#7c3aed";
      if (!scales[scale]) {
        scales[scale] = scale === "rate" ? { range: [0, 1] } : { auto: true };
        var n = axes.length; // the first axis on the left, then right, left, right
        var axis = {
          scale: scale,
          label: AXIS_LABELS[scale] || scale,
          side: n % 2 === 1 ? 3 : 1,
          stroke: color,
          grid: { show: n === 1 },
          size: 60,
        };
        if (scale === "groups") axis.incrs = WHOLE;
        axes.push(axis);
      }
      series.push({
        label: key,
        scale: scale,
        stroke: color,
        width: 2,
        spanGaps: true,
        points: { show: true },
      });
    });
    return {
      width: Math.max(320, box.clientWidth || 800),
      height: 260,
      scales: scales,
      axes: axes,
      series: series,
      hooks: {
        ready: [
          function (u) {
            u.over.addEventListener("click", function (event) {
              var i = u.cursor.idx;
              if (i === null || i === undefined || event.target.closest(".point-link")) return;
              openStep(box, u.data[0][i]);
            });
          },
        ],
        draw: [function (u) { linkPoints(box, u); }],
      },
    };
  }

  function render() {
    var box = document.getElementById("rl-curve-chart");
    var data = readData();
    if (!box || !data || !window.uPlot) return;
    var keys = Object.keys(data.series || {});
    var empty = document.getElementById("rl-curve-empty");
    box.setAttribute("data-points", String(data.steps.length));
    box.setAttribute("data-series", keys.join(" "));
    if (empty) empty.hidden = data.steps.length > 0;
    if (!data.steps.length) return;
    var columns = [data.steps].concat(keys.map(function (k) { return data.series[k].values; }));
    if (chart && keys.join("|") === names.join("|")) {
      chart.setData(columns);
      return;
    }
    if (chart) chart.destroy();
    names = keys;
    chart = new uPlot(options(box, data, keys), columns, box);
  }

  document.addEventListener("DOMContentLoaded", render);
  document.body.addEventListener("htmx:afterSwap", render);
  window.addEventListener("resize", function () {
    var box = document.getElementById("rl-curve-chart");
    if (chart && box) chart.setSize({ width: Math.max(320, box.clientWidth), height: 260 });
  });
})();
