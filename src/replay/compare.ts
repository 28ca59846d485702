// Two model directories compared tensor by tensor (`rlx replay`): which tensors are bit for bit
// the same, and for the others the largest absolute difference of an element, read as the
// tensor's dtype (F32, BF16, F16; other dtypes are compared as bytes). The tensors are taken in
// the file's order, so "the first that differs" is stable between runs.
import type { SafetensorsDtype, TensorView } from "../model/safetensors.ts";
import { readSafetensorsDir } from "../model/safetensors.ts";
import { RlxError } from "../errors.ts";

/** One tensor that differs: its name, and the largest |expected - actual| over its elements. */
export interface TensorDiff {
  name: string;
  maxAbsDiff: number;
  /** Elements that differ, of `elements`. */
  differing: number;
  elements: number;
}

export interface WeightsComparison {
  tensors: number;
  identical: number;
  /** Tensors that differ, in file order (the first is where to look). */
  differing: TensorDiff[];
  /** The largest difference over every tensor (0 when all are identical). */
  maxAbsDiff: number;
}

/** A tensor's elements as float64, for the float dtypes rlx writes; undefined for others. */
function values(view: TensorView): Float64Array | undefined {
  const bytes = view.data.slice(); // aligned copy: the mmap's subarray may start anywhere
  const decode: Partial<Record<SafetensorsDtype, () => Float64Array>> = {
    F32: () => Float64Array.from(new Float32Array(bytes.buffer)),
    F64: () => new Float64Array(bytes.buffer),
    BF16: () => {
      const halves = new Uint16Array(bytes.buffer);
      const widened = new Uint32Array(halves.length);
      for (let i = 0; i < halves.length; i++) widened[i] = halves[i]! << 16;
      return Float64Array.from(new Float32Array(widened.buffer));
    },
    F16: () => Float64Array.from(new Float16Array(bytes.buffer)),
  };
  return decode[view.dtype]?.();
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(a, b) === 0;
}

/** Compares `actual` (a replay's weights) with `expected` (what the run recorded). */
export function compareWeights(expectedDir: string, actualDir: string): WeightsComparison {
  const expected = readSafetensorsDir(expectedDir);
  const actual = readSafetensorsDir(actualDir);
  const missing = [...expected.keys()].filter((name) => !actual.has(name));
  if (missing.length > 0 || actual.size !== expected.size)
    throw new RlxError(
      `${actualDir} and ${expectedDir} hold different tensors (${missing.length ? `missing ${missing.slice(0, 3).join(", ")}` : `${actual.size} against ${expected.size}`})`,
      { fix: "compare weights of the same model: a replay must run with the run's own config.resolved.toml" },
    );
  const out: WeightsComparison = { tensors: expected.size, identical: 0, differing: [], maxAbsDiff: 0 };
  for (const [name, want] of expected) {
    const got = actual.get(name)!;
    if (got.dtype === want.dtype && sameBytes(got.data, want.data)) {
      out.identical++;
      continue;
    }
    const [a, b] = [values(want), values(got)];
    let maxAbsDiff = Number.NaN;
    let differing = want.data.length;
    const elements = a?.length ?? want.data.length;
    if (a && b && a.length === b.length) {
      maxAbsDiff = 0;
      differing = 0;
      for (let i = 0; i < a.length; i++) {
        const d = Math.abs(a[i]! - b[i]!);
        if (d > 0 || Number.isNaN(d)) differing++;
        if (d > maxAbsDiff || Number.isNaN(d)) maxAbsDiff = Number.isNaN(d) ? Number.POSITIVE_INFINITY : d;
      }
    }
    out.differing.push({ name, maxAbsDiff, differing, elements });
    out.maxAbsDiff = Math.max(out.maxAbsDiff, Number.isNaN(maxAbsDiff) ? Number.POSITIVE_INFINITY : maxAbsDiff);
  }
  return out;
}
