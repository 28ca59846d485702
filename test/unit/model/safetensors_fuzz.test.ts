// The safetensors reader on random and mutated bytes (fast-check, bounded runs): whatever the
// file holds, reading it either gives tensors whose views lie inside the file with the sizes their
// dtype and shape need, or throws a ModelFileError naming the file; never another exception,
// never a hang (each read is timed), never a view past the end.
import { afterAll, expect, test } from "bun:test";
import fc from "fast-check";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelFileError } from "../../../src/errors.ts";
import { DTYPE_BYTES, readSafetensors, writeSafetensors } from "../../../src/model/safetensors.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-st-fuzz-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let counter = 0;

const valid = join(dir, "valid.safetensors");
writeSafetensors(valid, [
  { name: "a", dtype: "F32", shape: [3, 4], data: new Uint8Array(48).fill(1) },
  { name: "b", dtype: "BF16", shape: [5], data: new Uint8Array(10).fill(2) },
  { name: "c", dtype: "I64", shape: [2], data: new Uint8Array(16).fill(3) },
]);
const good = new Uint8Array(readFileSync(valid));

/** Reads `bytes` as a safetensors file and checks the outcome is one of the two allowed. */
function readChecked(bytes: Uint8Array): void {
  const path = join(dir, `f${counter++}.safetensors`);
  writeFileSync(path, bytes);
  const started = process.cpuUsage(); // CPU time: what the reader costs, however loaded the machine
  try {
    const { tensors } = readSafetensors(path);
    const size = statSync(path).size;
    for (const t of tensors.values()) {
      expect(t.offset + t.data.byteLength).toBeLessThanOrEqual(size);
      expect(t.data.byteLength).toBe(t.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[t.dtype]);
    }
  } catch (err) {
    if (!(err instanceof ModelFileError)) throw err;
    expect(err.message.startsWith(path)).toBe(true);
  } finally {
    rmSync(path, { force: true });
  }
  const used = process.cpuUsage(started);
  expect((used.user + used.system) / 1000).toBeLessThan(1000);
}

test("random bytes: a named ModelFileError or a consistent file, nothing else", () => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), readChecked), { numRuns: 200, seed: 25 });
});

test("a valid file with bytes flipped, cut short, or a new header length: the same two outcomes", () => {
  const mutation = fc.oneof(
    fc
      .array(fc.tuple(fc.nat(good.length - 1), fc.integer({ min: 1, max: 255 })), { minLength: 1, maxLength: 8 })
      .map((flips) => {
        const bytes = good.slice();
        for (const [at, xor] of flips) bytes[at]! ^= xor;
        return bytes;
      }),
    fc.nat(good.length).map((length) => good.slice(0, length)),
    fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((length) => {
      const bytes = good.slice();
      new DataView(bytes.buffer).setBigUint64(0, length, true);
      return bytes;
    }),
  );
  fc.assert(fc.property(mutation, readChecked), { numRuns: 300, seed: 25 });
});

test("headers with random JSON entries: the same two outcomes", () => {
  const entry = fc.record(
    {
      dtype: fc.oneof(fc.constantFrom("F32", "BF16", "I8", "Q4"), fc.string()),
      shape: fc.oneof(fc.array(fc.integer({ min: -2, max: 2 ** 40 }), { maxLength: 4 }), fc.anything()),
      data_offsets: fc.oneof(fc.tuple(fc.nat(200), fc.nat(200)), fc.anything()),
    },
    { requiredKeys: [] },
  );
  const file = fc
    .tuple(fc.dictionary(fc.string({ maxLength: 8 }), entry, { maxKeys: 4 }), fc.uint8Array({ maxLength: 200 }))
    .map(([header, data]) => {
      const json = new TextEncoder().encode(JSON.stringify(header));
      const bytes = new Uint8Array(8 + json.length + data.length);
      new DataView(bytes.buffer).setBigUint64(0, BigInt(json.length), true);
      bytes.set(json, 8);
      bytes.set(data, 8 + json.length);
      return bytes;
    });
  fc.assert(fc.property(file, readChecked), { numRuns: 300, seed: 25 });
});
