// Draws the free-GPUs-per-node heatmap (one row per rack) from the JSON the fleet page embeds.
(function () {
  const data = JSON.parse(document.getElementById("rack-heatmap-data").textContent);
  const target = document.getElementById("rack-heatmap");
  if (!window.Plotly || !data.y.length) { target.textContent = "No racks."; return; }
  Plotly.newPlot(target, [{
    type: "heatmap", x: data.x, y: data.y, z: data.z, text: data.text,
    // -1 marks unavailable nodes: grey below the colour scale's range.
    colorscale: [[0, "#9ca3af"], [0.0001, "#081d58"], [0.5, "#41b6c4"], [1, "#ffffd9"]], zmin: -1, zmax: Math.max(1, data.zmax),
    xgap: 2, ygap: 2, hovertemplate: "%{text}<extra></extra>",
    colorbar: { title: { text: "free GPUs" } },
  }], { margin: { t: 10, l: 170, r: 10, b: 40 }, height: 80 + 28 * data.y.length, xaxis: { showticklabels: false } }, { displayModeBar: false, responsive: true })
    .then(function () { target.dataset.rendered = "true"; });
})();
