// `rlx report`: one self-contained HTML page (no network, opens offline) of one or several runs:
// uPlot charts of every metric (panels.page.js, charts.page.js) and a viewer of the audited
// rollouts with their tokens coloured by credit (viewer.page.js, browse.page.js). The runs' data
// is embedded as JSON; the scripts and styles come inlined from assets.ts.
import { basename, resolve } from "node:path";
import { RlxError } from "../errors.ts";
import { SCRIPTS, STYLES } from "./assets.ts";
import { type MetricsRow, readMetrics } from "./metrics.ts";
import { readSamples, type RunSamples } from "./samples.ts";

export interface PageRun extends RunSamples {
  name: string;
  dir: string;
  rows: MetricsRow[];
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);
/** JSON that is safe inside <script>: no `</script>` or `<!--` can appear in it. */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, "\\u003c");

/** Each run's name: its folder's name, made unique with its parent's when two share one. */
function runNames(dirs: readonly string[]): string[] {
  const names = dirs.map((d) => basename(resolve(d)));
  return names.map((name, i) =>
    names.indexOf(name) === names.lastIndexOf(name) ? name : `${basename(resolve(dirs[i]!, ".."))}/${name}`,
  );
}

export function readRuns(dirs: readonly string[]): PageRun[] {
  if (dirs.length === 0)
    throw new RlxError("rlx report needs a run directory", { fix: "rlx report RUN_DIR [RUN_DIR ...]" });
  const names = runNames(dirs);
  return dirs.map((dir, i) => ({ name: names[i]!, dir, rows: readMetrics(dir), ...readSamples(dir) }));
}

export function renderReport(dirs: readonly string[]): string {
  const runs = readRuns(dirs);
  const title = `rlx report: ${runs.map((r) => r.name).join(", ")}`;
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
${STYLES.map((css) => `<style>${css}</style>`).join("\n")}
</head><body>
<h1>${escapeHtml(title)}</h1>
<div id="runs"></div>
<div class="smoothing"><label>smoothing (EMA) <input id="smoothing" type="range" min="0" max="0.99" step="0.01"></label> <span id="smoothing-value"></span> <span class="note">raw values faint, smoothed solid; hover a chart for values</span></div>
<h2>Curves</h2><div id="charts"></div>
<h2>Rollouts</h2><div id="viewer"></div>
<script>window.RLX = ${scriptJson({ runs })};</script>
${SCRIPTS.map((js) => `<script>${js.replace(/<\/script/gi, "<\\/script")}</script>`).join("\n")}
</body></html>
`;
}
