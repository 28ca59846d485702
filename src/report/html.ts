// The run report: a self-contained HTML page (inline SVG, no scripts, no network) with one chart
// per metric family read from a run's metrics.jsonl. Families group keys by their prefix
// (`reward/math`, `reward/forth` -> one "reward" chart with a line per env), so new metrics show
// up without touching this file.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { RlxError } from "../errors.ts";

type Row = Record<string, unknown> & { step: number };
type Series = { name: string; points: [number, number][] };

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
/** Families shown first, in this order; the rest follow alphabetically. */
const ORDER = ["reward", "eval", "loss", "mismatch_kl", "entropy", "throughput", "time"];

export function readMetrics(runDir: string): Row[] {
  const path = join(runDir, "metrics.jsonl");
  if (!existsSync(path))
    throw new RlxError(`no metrics.jsonl in ${runDir}`, { fix: "give the output_dir of an rlx train run" });
  const rows: Row[] = [];
  readFileSync(path, "utf8")
    .split("\n")
    .forEach((line, i) => {
      if (!line.trim()) return;
      try {
        const row = JSON.parse(line) as Row;
        if (typeof row.step === "number") rows.push(row);
      } catch {
        throw new RlxError(`${path}:${i + 1}: not a JSON object`, {
          fix: "a line was cut by a crash? delete it and run the report again",
        });
      }
    });
  return rows;
}

export function families(rows: Row[]): Map<string, Series[]> {
  const byKey = new Map<string, [number, number][]>();
  for (const row of rows) {
    for (const [key, value] of Object.entries(row)) {
      if (key === "step" || typeof value !== "number" || !Number.isFinite(value)) continue;
      if (!byKey.has(key)) byKey.set(key, []);
      byKey.get(key)!.push([row.step, value]);
    }
  }
  const out = new Map<string, Series[]>();
  for (const [key, points] of byKey) {
    const family = key.split("/")[0]!;
    if (!out.has(family)) out.set(family, []);
    out.get(family)!.push({ name: key, points });
  }
  const rank = (f: string) => (ORDER.includes(f) ? ORDER.indexOf(f) : ORDER.length);
  return new Map([...out].sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b)));
}

const escape = (s: string) =>
  s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);
const fmt = (v: number) =>
  Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(2) : Number(v.toFixed(3)).toString();

function chart(title: string, series: Series[]): string {
  const [W, H, L, R, T, B] = [560, 240, 60, 12, 24, 28];
  const all = series.flatMap((s) => s.points);
  const [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  if (y0 === y1) [y0, y1] = [y0 - 1, y1 + 1];
  const sx = (x: number) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - R);
  const sy = (y: number) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  const lines = series.map((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const d = s.points.map(([x, y], j) => `${j ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join("");
    const dots =
      s.points.length === 1
        ? `<circle cx="${sx(s.points[0]![0])}" cy="${sy(s.points[0]![1])}" r="3" fill="${color}"/>`
        : "";
    return `<path d="${d}" fill="none" stroke="${color}" stroke-width="1.5"/>${dots}`;
  });
  const legend = series
    .map((s, i) => `<span style="color:${COLORS[i % COLORS.length]}">&#9632; ${escape(s.name)}</span>`)
    .join(" ");
  const axes =
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#888"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#888"/>` +
    `<text x="${L - 4}" y="${sy(y1) + 4}" text-anchor="end">${fmt(y1)}</text><text x="${L - 4}" y="${sy(y0)}" text-anchor="end">${fmt(y0)}</text>` +
    `<text x="${L}" y="${H - 8}">step ${x0}</text><text x="${W - R}" y="${H - 8}" text-anchor="end">${x1}</text>`;
  return `<figure><figcaption>${escape(title)}</figcaption><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${axes}${lines.join("")}</svg><div class="legend">${legend}</div></figure>`;
}

export function renderReport(runDir: string): string {
  const rows = readMetrics(runDir);
  const charts = [...families(rows)].map(([family, series]) => chart(family, series));
  const last = rows[rows.length - 1];
  return `<!doctype html><html><head><meta charset="utf-8"><title>rlx report: ${escape(runDir)}</title><style>
body{font:14px system-ui,sans-serif;margin:24px;color:#222}figure{display:inline-block;margin:8px;vertical-align:top}
figcaption{font-weight:600;margin-bottom:4px}svg text{font-size:11px;fill:#555}.legend{font-size:12px;max-width:560px}
</style></head><body><h1>rlx report</h1><p>${escape(runDir)}: ${rows.length} steps${last ? `, last step ${last.step}` : ""}</p>${charts.join("\n")}</body></html>`;
}
