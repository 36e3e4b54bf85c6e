// Draws the free-GPUs-per-rack heatmap from the JSON the fleet page embeds.
(function () {
  const data = JSON.parse(document.getElementById("rack-heatmap-data").textContent);
  const target = document.getElementById("rack-heatmap");
  if (!window.Plotly || !data.y.length) { target.textContent = "No racks."; return; }
  Plotly.newPlot(target, [{
    type: "heatmap", x: data.x, y: data.y, z: data.z, text: data.text,
    colorscale: "YlGnBu", hovertemplate: "%{text}: %{z} free GPUs<extra></extra>",
    colorbar: { title: { text: "free GPUs" } },
  }], { margin: { t: 10, l: 140, r: 10, b: 40 }, height: 80 + 50 * data.y.length }, { displayModeBar: false, responsive: true })
    .then(function () { target.dataset.rendered = "true"; });
})();
