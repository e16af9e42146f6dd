// The job page's metrics chart: reads the series that the polled progress fragment carries
// (a json_script block) and redraws with uPlot after every htmx swap, without reloading.
// Series of different kinds have their own scale and axis (loss and rewards, learning rate,
// gradient norm, throughput, counts, seconds), so a loss near 1 is not flattened against
// thousands of tokens per second; the box's data-scales names each series' scale. A box with a
// data-step-url (a training run's page) makes every point a link to its step's samples.
(function () {
  "use strict";
  var chart = null;
  var names = [];
  var palette = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#be185d"];
  var KINDS = [
    ["learning rate", /(^|[\/_])(learning_rate|lr)$/],
    ["per second", /(per_s|per_sec|per_second|throughput|\/s)$/],
    ["grad norm", /grad_norm/],
    ["seconds", /(seconds|_time|_s)$/],
    ["count", /(^|[\/_])(tokens|completions|pairs|dropped|examples|count)$/],
  ];

  function scaleOf(name) {
    for (var i = 0; i < KINDS.length; i++) {
      if (KINDS[i][1].test(name)) return KINDS[i][0];
    }
    return "value";
  }

  function readSeries() {
    var el = document.getElementById("job-metrics-data");
    if (!el) return null;
    try { return JSON.parse(el.textContent); } catch (e) { return null; }
  }

  function tickValues(scale) {
    if (scale !== "learning rate") return undefined;
    return function (u, values) {
      return values.map(function (v) { return v === 0 ? "0" : v.toExponential(1); });
    };
  }

  function options(box, keys) {
    var scales = { x: { time: false } };
    // steps are whole numbers: no tick at step 1.05
    var axes = [{ label: "step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000] }];
    var series = [{ label: "step" }];
    var byName = {};
    keys.forEach(function (k, i) {
      var scale = scaleOf(k);
      var color = palette[i % palette.length];
      byName[k] = scale;
      if (!scales[scale]) {
        scales[scale] = { auto: true };
        var first = axes.length === 1;
        axes.push({
          scale: scale,
          label: scale === "value" ? k : scale,  // the first series on the shared scale
          side: first || axes.length % 2 === 1 ? 3 : 1,
          stroke: color,
          grid: { show: first },
          size: 60,
          values: tickValues(scale),
        });
      }
      series.push({ label: k, scale: scale, stroke: color, width: 2, spanGaps: true });
    });
    box.setAttribute("data-scales", JSON.stringify(byName));
    var opts = {
      width: Math.max(320, box.clientWidth || 800),
      height: 260,
      scales: scales,
      axes: axes,
      series: series,
    };
    // the training run's page sets it on the box; a training job's page in its detail part
    var marker = document.getElementById("metrics-step-url");
    var template = box.getAttribute("data-step-url") ||
      (marker && marker.getAttribute("data-step-url"));
    if (template && window.SteplabPointLinks) {
      // a training run's curve: every point opens the samples its step trained on
      var links = window.SteplabPointLinks;
      var urlOf = function (u, i) { return links.stepUrl(template, u.data[0][i]); };
      opts.hooks = {
        ready: [function (u) {
          u.over.addEventListener("click", function (event) {
            var i = u.cursor.idx;
            if (i === null || i === undefined || event.target.closest(".point-link")) return;
            window.location.href = urlOf(u, i);
          });
        }],
        draw: [function (u) {
          links.attach(u, {
            url: function (i) { return urlOf(u, i); },
            label: function (i) { return links.describe(u, i); },
          });
        }],
      };
    }
    return opts;
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
    chart = new uPlot(options(box, keys), columns, box);
  }

  document.addEventListener("DOMContentLoaded", render);
  document.body.addEventListener("htmx:afterSwap", render);
  window.addEventListener("resize", function () {
    var box = document.getElementById("metrics-chart");
    if (chart && box) chart.setSize({ width: Math.max(320, box.clientWidth), height: 260 });
  });
})();
