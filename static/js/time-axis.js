// The time axis of every use and borrowing chart: one line of tick labels, clock times within two days and dates
// beyond (times are UTC, as everywhere on the pages). Loaded before the scripts that draw those charts.
window.timeAxis = function (times) {
  const span = times.length > 1 ? Date.parse(times[times.length - 1]) - Date.parse(times[0]) : 0;
  return { type: "date", nticks: 6, tickformat: span > 2 * 86400e3 ? "%b %d" : "%H:%M", hoverformat: "%b %d %H:%M UTC" };
};
