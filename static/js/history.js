// Draws the history charts (waits per queue and day; admissions and preemptions per day) from the page's JSON.
(function () {
  const source = document.getElementById("history-data");
  if (!source || !window.Plotly) return;
  const data = JSON.parse(source.textContent);
  const queues = Object.keys(data.queues).sort();
  const layout = { margin: { t: 10, l: 50, r: 10, b: 40 }, height: 260, legend: { orientation: "h" }, xaxis: { type: "category" } };
  const options = { displayModeBar: false, responsive: true };
  const mark = function (target) { return function () { target.dataset.rendered = "true"; }; };
  const waits = document.getElementById("history-waits");
  Plotly.newPlot(waits, queues.map(function (q) {
    return { x: data.days, y: data.queues[q].p50_min, name: q, type: "scatter", mode: "lines+markers", connectgaps: false };
  }), Object.assign({}, layout, { yaxis: { title: { text: "minutes" }, rangemode: "tozero" } }), options).then(mark(waits));
  const total = function (key) {
    return data.days.map(function (_, i) { return queues.reduce(function (sum, q) { return sum + (data.queues[q][key][i] || 0); }, 0); });
  };
  const counts = document.getElementById("history-counts");
  Plotly.newPlot(counts, [
    { x: data.days, y: total("admissions"), name: "admissions", type: "bar", marker: { color: "#2457d6" } },
    { x: data.days, y: total("preemptions"), name: "preemptions", type: "bar", marker: { color: "#c0392b" } },
  ], Object.assign({}, layout, { barmode: "group", yaxis: { title: { text: "jobs" }, rangemode: "tozero" } }), options).then(mark(counts));
})();
