// The time axis of every use and borrowing chart: one line of tick labels, clock times within two days and dates
// beyond (times are UTC, as everywhere on the pages). Loaded before the scripts that draw those charts.
window.timeAxis = function (times) {
  const span = times.length > 1 ? Date.parse(times[times.length - 1]) - Date.parse(times[0]) : 0;
  return { type: "date", nticks: 6, tickformat: span > 2 * 86400e3 ? "%b %d" : "%H:%M", hoverformat: "%b %d %H:%M UTC" };
};

// The times of `count` bins `stepS` seconds apart from `start` (a chart sends its first bin's time and the step, not
// every time), as Plotly reads dates: UTC, without the zone.
window.binTimes = function (start, stepS, count) {
  const first = Date.parse(start);
  return Array.from({ length: count }, function (_, i) { return new Date(first + i * stepS * 1000).toISOString().slice(0, 19); });
};
