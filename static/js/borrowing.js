// Draws the borrowing-over-time charts (each borrowing queue stacked above zero, each lender below it, one colour per
// queue on both sides) from the JSON each chart embeds, on page load and whenever htmx swaps a new set in.
(function () {
  const PALETTE = ["#2457d6", "#b7791f", "#1e8e4e", "#c0392b", "#7c3aed", "#0e7490", "#be185d", "#4d7c0f", "#9a3412", "#475569"];
  function traces(data, byQueue, sign, colour) {
    return Object.keys(byQueue).map(function (queue) {
      const verb = sign > 0 ? " borrows" : " lends";
      return { x: data.t, y: byQueue[queue].map(function (v) { return sign * v; }), customdata: byQueue[queue],
               name: queue + verb, legendgroup: queue, type: "scatter", mode: "lines", stackgroup: sign > 0 ? "borrowed" : "lent",
               line: { width: 0.5, shape: "hv", color: colour[queue] }, fillcolor: colour[queue] + (sign > 0 ? "cc" : "55"),
               hovertemplate: queue + verb + " %{customdata:.1f} GPUs<extra></extra>" };
    });
  }
  function draw(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-borrowing-chart]:not([data-rendered])").forEach(function (target) {
      const data = JSON.parse(document.getElementById(target.dataset.borrowingChart).textContent);
      const colour = {};
      Object.keys(data.borrowed).concat(Object.keys(data.lent)).sort().forEach(function (queue) {
        if (!(queue in colour)) colour[queue] = PALETTE[Object.keys(colour).length % PALETTE.length];
      });
      Plotly.newPlot(target, traces(data, data.borrowed, 1, colour).concat(traces(data, data.lent, -1, colour)), {
        margin: { t: 6, l: 44, r: 8, b: 28 }, height: 220, legend: { orientation: "h", y: -0.18 },
        yaxis: { title: { text: "GPUs" }, zeroline: true, zerolinewidth: 2 }, xaxis: window.timeAxis(data.t),
      }, { displayModeBar: false, responsive: true }).then(function () { target.dataset.rendered = "true"; });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.target); });
})();
