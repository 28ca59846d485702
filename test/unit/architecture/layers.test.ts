// The layering rules of docs/architecture.md, read from the import statements of src/: every
// import points to a folder of the same or a lower layer, folders never import each other in a
// cycle, the orchestrator and the trainer never import each other, neither the algorithms nor the
// orchestrator nor the config import the native layer (data sits below it), and only src/native/
// touches bun:ffi or the shim's file.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = join(import.meta.dir, "../../../src");

/** Lowest first; a folder may import its own layer (without a cycle) and any layer below. */
const LAYERS: string[][] = [
  ["did_you_mean.ts", "errors.ts", "plugin.ts"],
  ["data"],
  ["native"],
  ["model"],
  ["clients", "engine", "envs", "judges"],
  ["algorithms", "hub", "plan", "rollout", "rundir", "serve", "task_samplers"],
  ["config"],
  ["processes"],
  ["orchestrator", "trainer", "sft", "eval", "report", "replay"],
  ["cli"],
  ["main.ts"],
];
const layerOf = new Map(LAYERS.flatMap((names, i) => names.map((name) => [name, i] as const)));

/** The top-level folder (or root file) of a path under src/. */
const unit = (file: string) => relative(SRC, file).split("/")[0]!;

function sources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts"))
    .map((f) => join(dir, f));
}

interface Edge {
  from: string;
  to: string;
  file: string;
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["']([^"']+)["']/g;

/** A file's text without its comments. */
const code = (file: string) =>
  readFileSync(file, "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/^\s*\/\/.*$/gm, "");

function edges(): Edge[] {
  const out: Edge[] = [];
  for (const file of sources(SRC)) {
    for (const match of code(file).matchAll(SPECIFIER)) {
      const spec = match[1]!;
      if (!spec.startsWith(".")) continue;
      const target = resolve(dirname(file), spec);
      if (!target.startsWith(SRC)) continue;
      out.push({ from: unit(file), to: unit(target), file: relative(SRC, file) });
    }
  }
  return out;
}

test("every folder of src/ has a layer", () => {
  const units = new Set(sources(SRC).map(unit));
  expect([...units].filter((u) => !layerOf.has(u))).toEqual([]);
});

test("imports point to the same layer or below", () => {
  expect(edges().length).toBeGreaterThan(300); // the parser sees the imports
  const up = edges()
    .filter((e) => layerOf.get(e.to)! > layerOf.get(e.from)!)
    .map((e) => `${e.file} -> ${e.to}`);
  expect(up).toEqual([]);
});

test("no cycle between folders", () => {
  const graph = new Map<string, Set<string>>();
  for (const e of edges()) if (e.from !== e.to) graph.set(e.from, (graph.get(e.from) ?? new Set()).add(e.to));
  const reaches = (from: string, to: string, seen = new Set<string>()): boolean => {
    if (from === to) return true;
    if (seen.has(from)) return false;
    seen.add(from);
    return [...(graph.get(from) ?? [])].some((next) => reaches(next, to, seen));
  };
  const cycles = [...graph].flatMap(([from, tos]) =>
    [...tos].filter((to) => reaches(to, from)).map((to) => `${from} <-> ${to}`),
  );
  expect(cycles).toEqual([]);
});

test("orchestrator and trainer do not import each other; algorithms, orchestrator and config do not import native", () => {
  const banned = (from: string, to: string) => (e: Edge) => e.from === from && e.to === to;
  const bad = edges().filter((e) =>
    [
      banned("orchestrator", "trainer"),
      banned("trainer", "orchestrator"),
      banned("algorithms", "trainer"),
      banned("algorithms", "native"),
      banned("orchestrator", "native"),
      banned("config", "native"),
    ].some((f) => f(e)),
  );
  expect(bad.map((e) => `${e.file} -> ${e.to}`)).toEqual([]);
});

test("only src/native/ reaches the shim: bun:ffi, dlopen and native/build", () => {
  const outside = sources(SRC)
    .filter((file) => unit(file) !== "native")
    .filter((file) => /["']bun:ffi["']|\bdlopen\(|native\/build\//.test(code(file)))
    .map((file) => relative(SRC, file));
  expect(outside).toEqual([]);
  const dlopens = sources(join(SRC, "native")).filter((file) => /\bdlopen\(/.test(code(file)));
  expect(dlopens.map((file) => relative(SRC, file))).toEqual(["native/ffi.ts"]);
});
