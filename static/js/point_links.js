// Every point of a uPlot chart as a real link (issue 21): one <a href> per x value, laid over the
// plot at the point's place, so a click opens the samples behind the point, the link can be opened
// in a new tab, and Tab reaches every point from the keyboard (each has an aria-label saying its
// step and values). window.SteplabPointLinks.attach(u, options) after the chart is drawn (uPlot's
// "draw" hook calls it again after every redraw); options:
//   url(i)    -> the URL of the i-th x value (null: no link for it),
//   label(i)  -> its accessible name,
//   onOpen(i, event) -> optional: handle a plain click instead of following the link (htmx);
//                       return true when handled.
// At most MAX links are made (evenly thinned beyond that: the chart's own click still reaches
// every point under the cursor).
(function () {
  "use strict";
  var MAX = 1000;

  function firstY(u, i) {
    for (var s = 1; s < u.series.length; s++) {
      var v = u.data[s] && u.data[s][i];
      if (v !== null && v !== undefined && u.series[s].show !== false) {
        return u.valToPos(v, u.series[s].scale);
      }
    }
    return u.over.clientHeight / 2;
  }

  function attach(u, options) {
    var layer = u.over.querySelector(".point-links");
    if (!layer) {
      layer = document.createElement("div");
      layer.className = "point-links";
      u.over.appendChild(layer);
    }
    while (layer.firstChild) layer.removeChild(layer.firstChild);
    var xs = u.data[0] || [];
    var stride = Math.max(1, Math.ceil(xs.length / MAX));
    for (var i = 0; i < xs.length; i += stride) {
      var href = options.url(i);
      if (!href) continue;
      var a = document.createElement("a");
      a.className = "point-link";
      a.href = href;
      a.setAttribute("data-x", String(xs[i]));
      a.setAttribute("data-testid", "point-link");
      a.setAttribute("aria-label", options.label ? options.label(i) : "point " + xs[i]);
      a.title = a.getAttribute("aria-label");
      a.style.left = u.valToPos(xs[i], "x") + "px";
      a.style.top = firstY(u, i) + "px";
      if (options.onOpen) {
        (function (index) {
          a.addEventListener("click", function (event) {
            if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
            if (options.onOpen(index, event)) event.preventDefault();
          });
        })(i);
      }
      layer.appendChild(a);
    }
    u.root.setAttribute("data-point-links", String(layer.childNodes.length));
  }

  function describe(u, i) {
    var parts = [u.series[0].label + " " + u.data[0][i]];
    for (var s = 1; s < u.series.length; s++) {
      var v = u.data[s] && u.data[s][i];
      if (v !== null && v !== undefined) parts.push(u.series[s].label + " " + (+v).toPrecision(4));
    }
    return parts.join(", ");
  }

  // A URL reversed with step 0 (e.g. /training/5/steps/0/samples/) for another step: the last
  // "/0/" segment is the step.
  function stepUrl(template, step) {
    return (template || "").replace(/\/0\/(?!.*\/0\/)/, "/" + step + "/");
  }

  window.SteplabPointLinks = { attach: attach, describe: describe, stepUrl: stepUrl };
})();
