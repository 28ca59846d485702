// Suggestions for a misspelled name, shared by the command line's unknown flags and commands
// (src/cli/strict.ts) and a config's unknown keys (src/errors.ts's configError): the closest known
// name by edit distance, and the keys a zod schema accepts at a key path (through optional,
// default, transformed, lazy and union schemas, arrays and records), so that an unknown key is
// answered with the keys that are there, not a source file a binary's user does not have.
import type { z } from "zod";

/** The candidate with the smallest edit distance to `name` (ties: the first). */
export function closest(name: string, candidates: readonly string[]): string {
  let best = candidates[0]!;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

/** Levenshtein distance (insertions, deletions, substitutions). */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = row;
  }
  return previous[b.length]!;
}

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  in?: z.ZodType;
  out?: z.ZodType;
  left?: z.ZodType;
  right?: z.ZodType;
  element?: z.ZodType;
  valueType?: z.ZodType;
  options?: z.ZodType[];
  getter?: () => z.ZodType;
}
// a schema that is not zod 4's (an env file may bring any object with safeParse) has no def
const def = (schema: z.ZodType): Def =>
  (schema as unknown as { _zod?: { def?: Def } })?._zod?.def ?? { type: "unknown" };

/** The schemas a value of `schema` may be checked by, wrappers taken off. */
function unwrap(schema: z.ZodType): z.ZodType[] {
  const d = def(schema);
  if (d.innerType) return unwrap(d.innerType); // optional, default, nullable, readonly, catch, ...
  // a transform (in: the object) or a preprocess (out: the object)
  if (d.type === "pipe") return [...(d.in ? unwrap(d.in) : []), ...(d.out ? unwrap(d.out) : [])];
  if (d.type === "intersection") return [...(d.left ? unwrap(d.left) : []), ...(d.right ? unwrap(d.right) : [])];
  if (d.type === "lazy" && d.getter) return unwrap(d.getter());
  if (d.type === "union" && d.options) return d.options.flatMap(unwrap);
  return [schema];
}

/** The keys an object at `path` of a value checked by `schema` may have; [] where none is known. */
export function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let nodes = unwrap(schema);
  for (const part of path) {
    nodes = nodes.flatMap((node) => {
      const d = def(node);
      if (d.type === "object" && typeof part === "string" && d.shape?.[part]) return unwrap(d.shape[part]);
      if (d.type === "array" && typeof part === "number" && d.element) return unwrap(d.element);
      if (d.type === "record" && d.valueType) return unwrap(d.valueType);
      return [];
    });
  }
  const keys = nodes.flatMap((node) => (def(node).type === "object" ? Object.keys(def(node).shape ?? {}) : []));
  return [...new Set(keys)];
}

/** ` did you mean "x"?` when a known name is near enough to be the one meant, else "". */
export function didYouMean(name: string, known: readonly string[]): string {
  if (known.length === 0) return "";
  const best = closest(name, known);
  return editDistance(name, best) <= Math.max(2, Math.floor(name.length / 3)) ? ` did you mean "${best}"?` : "";
}
