// Browser code of `rlx report`: the uPlot charts. A metric panel draws, per run, the raw values
// as a faint line and their EMA (the page's smoothing slider) as a solid one; hovering shows each
// series' value at the cursor's step in the legend. A step-time panel stacks the parts of one
// run's step time as filled areas, the legend showing each part's own seconds.

const PANEL_SIZE = { width: 360, height: 220 };
/** Series with fewer points (held-out evals, every N steps) are drawn unsmoothed. */
const SMOOTH_MIN_POINTS = 10;
const charts = [];

function fmt(v) {
  if (v === null || v === undefined) return "-";
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
}

function faint(color) {
  return color + "55";
}

function panelElement(parent, title, points) {
  const panel = document.createElement("div");
  panel.className = "panel";
  panel.dataset.key = title;
  panel.dataset.points = String(points);
  parent.appendChild(panel);
  return panel;
}

/** A panel for one metric key over every run. */
function metricPanel(parent, runs, key, smoothing) {
  const { xs, ys } = alignedSeries(runs, key);
  const points = ys.flat().filter((v) => v !== null).length;
  const panel = panelElement(parent, key, points);
  const log = wantsLog(ys);
  const series = [{ label: "step", value: (u, v) => (v === null ? "-" : String(v)) }];
  runs.forEach((run, i) => {
    const color = runColor(i);
    const single = xs.length === 1;
    series.push({ label: `${run.name} raw`, stroke: faint(color), width: 1, spanGaps: true });
    series.push({
      label: run.name,
      stroke: color,
      width: 2,
      spanGaps: true,
      points: { show: single || xs.length < 12, size: 5 },
      // the legend's one entry per run: the raw value, and the smoothed one when they differ
      value: (u, v, si, idx) => {
        const raw = idx === null ? null : u.data[si - 1][idx];
        return raw === null || raw === undefined || fmt(raw) === fmt(v) ? fmt(raw) : `${fmt(raw)} (ema ${fmt(v)})`;
      },
    });
  });
  const weight = (raw) => (raw.filter((v) => v !== null).length >= SMOOTH_MIN_POINTS ? smoothing.value : 0);
  const data = () => [xs, ...ys.flatMap((raw) => [raw, ema(raw, weight(raw))])];
  const chart = new uPlot(
    {
      title: log ? `${key} (log)` : key,
      ...PANEL_SIZE,
      scales: { x: { time: false }, y: log ? { distr: 3 } : { range: padRange } },
      axes: [{}, { size: 56, values: (u, splits) => splits.map(fmt) }],
      series,
      legend: { live: true },
    },
    data(),
    panel,
  );
  // the raw series' legend entries are folded into their run's entry
  chart.root.querySelectorAll(".u-legend .u-series").forEach((row, i) => {
    if (i > 0 && i % 2 === 1) row.style.display = "none";
  });
  charts.push({ chart, refresh: () => chart.setData(data()) });
}

/**
 * A y range with a margin, and a visible one for a flat line: all values equal, or equal but for
 * rounding (the EMA of a constant 256 reads 256.00000000000006), whose range uPlot cannot divide
 * into ticks (its loop adds an increment that rounds away, until the tick array overflows).
 */
function padRange(u, min, max) {
  if (min === null || max === null) return [0, 1];
  if (max - min <= 1e-9 * Math.max(Math.abs(min), Math.abs(max))) {
    const pad = Math.abs(min) * 0.5 || 0.5;
    return [min - pad, max + pad];
  }
  const pad = (max - min) * 0.08;
  return [min - pad, max + pad];
}

/** One run's step time, its parts stacked as areas, `time/step` as a line over them. */
function timePanel(parent, run, runIndex) {
  const parts = TIME_PARTS.filter((key) => run.rows.some((row) => key in row));
  if (parts.length === 0) return;
  const rows = run.rows.filter((row) => parts.some((key) => key in row) && row.step > 0);
  const xs = rows.map((row) => row.step);
  const own = parts.map((key) => rows.map((row) => row[key] ?? 0));
  const stacked = own.map((_, i) => xs.map((__, j) => own.slice(0, i + 1).reduce((s, part) => s + part[j], 0)));
  const total = rows.map((row) => row["time/step"] ?? null);
  const panel = panelElement(parent, `step time: ${run.name}`, xs.length);
  panel.classList.add("wide");
  const palette = ["#8dd3c7", "#80b1d3", "#bebada", "#fb8072", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9"];
  // drawn top of the stack first, so each lower area paints over the one above it
  const order = parts.map((_, i) => parts.length - 1 - i);
  const series = [{ label: "step" }];
  for (const i of order)
    series.push({
      label: parts[i].slice("time/".length),
      stroke: palette[i % palette.length],
      fill: palette[i % palette.length],
      width: 1,
      value: (u, v, si, idx) => (idx === null ? "-" : fmt(own[i][idx]) + " s"),
    });
  series.push({
    label: "step (total)",
    stroke: runColor(runIndex),
    width: 2,
    dash: [4, 3],
    value: (u, v) => fmt(v) + " s",
  });
  const chart = new uPlot(
    {
      title: `step time (s), stacked: ${run.name}`,
      width: PANEL_SIZE.width * 2 + 12,
      height: PANEL_SIZE.height,
      scales: { x: { time: false } },
      axes: [{}, { size: 56, values: (u, splits) => splits.map(fmt) }],
      series,
      legend: { live: true },
    },
    [xs, ...order.map((i) => stacked[i]), total],
    panel,
  );
  charts.push({ chart, refresh: () => {} });
}

function refreshCharts() {
  for (const c of charts) c.refresh();
}
