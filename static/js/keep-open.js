// Live fragments are swapped in every few seconds; a <details id="…"> the reader opened or closed keeps that state
// across the swaps (without this, the placement list of a big gang would fold up again every three seconds).
(function () {
  const chosen = new Map();
  document.addEventListener("toggle", function (event) {
    const details = event.target;
    if (details.tagName === "DETAILS" && details.id) chosen.set(details.id, details.open);
  }, true);
  document.addEventListener("htmx:afterSwap", function () {
    chosen.forEach(function (open, id) {
      const details = document.getElementById(id);
      if (details) details.open = open;
    });
  });
})();
