// Draws the use-over-time charts (allocated as an area, used as a line) from the JSON each chart embeds, on page
// load and whenever htmx swaps a new set in (a window or grouping chosen, or the minute's refresh).
(function () {
  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-usage-chart]:not([data-rendered])").forEach(function (target) {
      const data = JSON.parse(document.getElementById(target.dataset.usageChart).textContent);
      data.t = window.binTimes(data.start, data.step_s, data.allocated.length);
      Plotly.newPlot(target, [
        { x: data.t, y: data.allocated, name: "allocated", type: "scatter", mode: "lines", fill: "tozeroy",
          line: { color: "#93a8d6", width: 1, shape: "hv" }, hovertemplate: "%{y:.1f} GPUs allocated<extra></extra>" },
        { x: data.t, y: data.used, name: "used", type: "scatter", mode: "lines",
          line: { color: "#1e8e4e", width: 2, shape: "hv" }, hovertemplate: "%{y:.1f} GPUs used<extra></extra>" },
      ], { margin: { t: 6, l: 40, r: 8, b: 28 }, height: 160, showlegend: false, yaxis: { rangemode: "tozero", title: { text: "GPUs" } },
          xaxis: window.timeAxis(data.t) },
      { displayModeBar: false, responsive: true }).then(function () { target.dataset.rendered = "true"; });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.target); });
})();
