// Browser code of `rlx report` (plain script, inlined into the page by src/report/html.ts): which
// panels the page has. One panel per metric key, its own axis; the overview puts each env's
// training reward beside its held-out eval curves; the step-time breakdown is its own panel per
// run. Keys are grouped into sections by their first `/` component, like metrics.jsonl's names.

/** Sections shown first, in this order; the rest follow alphabetically. */
const FAMILY_ORDER = ["reward", "eval", "loss", "mismatch_kl", "entropy", "optim", "throughput", "time"];
/** The parts of a step's time, stacked bottom to top (docs/run-directory.md, Metrics). */
const TIME_PARTS = [
  "time/wait_for_policy",
  "time/rollouts",
  "time/pack",
  "time/train",
  "time/publish",
  "time/checkpoint",
  "time/reload",
  "time/eval",
];
/** The held-out scores the overview shows beside the training reward. */
const HELD_OUT = /^(avg@\d+|pass@\d+|greedy\/pass@1)$/;
const RUN_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

function runColor(i) {
  return RUN_COLORS[i % RUN_COLORS.length];
}

/** Every numeric key of any run but step and time (a unix timestamp, not a curve). */
function metricKeys(runs) {
  const keys = new Set();
  for (const run of runs) for (const row of run.rows) for (const key of Object.keys(row)) keys.add(key);
  keys.delete("step");
  keys.delete("time");
  return [...keys].sort();
}

function family(key) {
  return key.split("/")[0];
}

/** Overview rows: per env, `reward/<env>` then that env's eval keys (avg@k, pass@k, greedy). */
function overviewPanels(keys) {
  const envs = new Set();
  for (const key of keys) {
    const train = /^reward\/([^/]+)$/.exec(key);
    const held = /^eval\/([^/]+)\/(.+)$/.exec(key);
    if (train) envs.add(train[1]);
    if (held && HELD_OUT.test(held[2])) envs.add(held[1]);
  }
  const rows = [];
  for (const env of [...envs].sort()) {
    const prefix = `eval/${env}/`;
    const held = keys.filter((k) => k.startsWith(prefix) && HELD_OUT.test(k.slice(prefix.length)));
    rows.push({ env, keys: [...keys.filter((k) => k === `reward/${env}`), ...held] });
  }
  // envs with held-out scores first: the comparison the section is for
  return rows.sort((a, b) => b.keys.length - a.keys.length);
}

/** Sections of single-metric panels, overview keys left out (they are shown above). */
function familySections(keys, shown) {
  const byFamily = new Map();
  for (const key of keys) {
    if (shown.has(key)) continue;
    if (!byFamily.has(family(key))) byFamily.set(family(key), []);
    byFamily.get(family(key)).push(key);
  }
  const rank = (f) => (FAMILY_ORDER.includes(f) ? FAMILY_ORDER.indexOf(f) : FAMILY_ORDER.length);
  return [...byFamily]
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([name, keys]) => ({ name, keys }));
}

/** The x values of every run (union of steps) and, per run, the key's value at each (null: none). */
function alignedSeries(runs, key) {
  const steps = new Set();
  for (const run of runs) for (const row of run.rows) if (key in row) steps.add(row.step);
  const xs = [...steps].sort((a, b) => a - b);
  const ys = runs.map((run) => {
    const at = new Map(run.rows.filter((row) => key in row).map((row) => [row.step, row[key]]));
    return xs.map((x) => (at.has(x) ? at.get(x) : null));
  });
  return { xs, ys };
}

/** TensorBoard's smoothing: an exponential moving average, debiased at the start. */
function ema(values, weight) {
  let last = 0;
  let n = 0;
  return values.map((v) => {
    if (v === null || weight <= 0) return v;
    last = last * weight + (1 - weight) * v;
    n++;
    return last / (1 - Math.pow(weight, n));
  });
}

/** A log axis when every value is positive and they span at least two decades. */
function wantsLog(ys) {
  const values = ys.flat().filter((v) => v !== null);
  if (values.length < 2 || values.some((v) => v <= 0)) return false;
  return Math.max(...values) / Math.min(...values) >= 100;
}
