// Draws the borrowing-over-time charts (each borrowing queue stacked above zero, each lender below it) from the JSON
// each chart embeds, on page load and whenever htmx swaps a new set in (another window, or the minute's refresh).
(function () {
  function traces(byQueue, sign, group) {
    return Object.keys(byQueue).map(function (queue) {
      return { x: null, y: byQueue[queue].map(function (v) { return sign * v; }), name: queue + (sign > 0 ? " borrows" : " lends"),
               type: "scatter", mode: "lines", stackgroup: group, line: { width: 0.5, shape: "hv" },
               hovertemplate: queue + (sign > 0 ? " borrows" : " lends") + " %{customdata:.1f} GPUs<extra></extra>",
               customdata: byQueue[queue] };
    });
  }
  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-borrowing-chart]:not([data-rendered])").forEach(function (target) {
      const data = JSON.parse(document.getElementById(target.dataset.borrowingChart).textContent);
      const all = traces(data.borrowed, 1, "borrowed").concat(traces(data.lent, -1, "lent"));
      all.forEach(function (trace) { trace.x = data.t; });
      Plotly.newPlot(target, all, {
        margin: { t: 6, l: 44, r: 8, b: 28 }, height: 220, legend: { orientation: "h", y: -0.18 },
        yaxis: { title: { text: "GPUs" }, zeroline: true, zerolinewidth: 2 }, xaxis: window.timeAxis(data.t),
      }, { displayModeBar: false, responsive: true }).then(function () { target.dataset.rendered = "true"; });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.target); });
})();
