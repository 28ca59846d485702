// safetensors reading and writing: exact bytes against a hand-computed file, round trips of every
// dtype, shard layout, and one named error per kind of damage.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelFileError } from "../../../src/errors.ts";
import { checksumFile } from "../../../src/model/checksums.ts";
import {
  INDEX_FILE,
  readSafetensors,
  readSafetensorsDir,
  SINGLE_FILE,
  shardName,
  type TensorToWrite,
  writeSafetensors,
  writeSafetensorsDir,
} from "../../../src/model/safetensors.ts";

const root = mkdtempSync(join(tmpdir(), "rlx-st-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const fresh = (name = "t.safetensors") => join(root, `${counter++}-${name}`);
const bytesOf = (array: ArrayBufferView) => new Uint8Array(array.buffer, array.byteOffset, array.byteLength);

/** A safetensors file from a literal header string and data bytes, no padding, for the reader's error paths. */
function handMade(header: string, data: Uint8Array = new Uint8Array(0), lengthOverride?: bigint): string {
  const json = new TextEncoder().encode(header);
  const out = new Uint8Array(8 + json.byteLength + data.byteLength);
  new DataView(out.buffer).setBigUint64(0, lengthOverride ?? BigInt(json.byteLength), true);
  out.set(json, 8);
  out.set(data, 8 + json.byteLength);
  const path = fresh();
  writeFileSync(path, out);
  return path;
}

function expectFileError(fn: () => unknown, ...parts: string[]): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ModelFileError);
  for (const part of parts) expect((caught as Error).message).toContain(part);
}

describe("safetensors writer", () => {
  test("writes the exact bytes of a hand-computed file: u64 length, padded JSON, data in name order", () => {
    const path = fresh();
    const b = new Float32Array([1.5, -2]);
    const a = new Uint16Array([0x3f80]); // bf16 1.0
    writeSafetensors(path, [
      { name: "b", dtype: "F32", shape: [2], data: bytesOf(b) },
      { name: "a", dtype: "BF16", shape: [1, 1], data: bytesOf(a) },
    ]);
    const json =
      '{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[1,1],"data_offsets":[0,2]},' +
      '"b":{"dtype":"F32","shape":[2],"data_offsets":[2,10]}}';
    const padded = json + " ".repeat((8 - (json.length % 8)) % 8);
    const expected = new Uint8Array(8 + padded.length + 10);
    new DataView(expected.buffer).setBigUint64(0, BigInt(padded.length), true);
    expected.set(new TextEncoder().encode(padded), 8);
    expected.set([0x80, 0x3f], 8 + padded.length); // a, little-endian
    expected.set(bytesOf(b), 8 + padded.length + 2);
    expect(new Uint8Array(readFileSync(path))).toEqual(expected);
    expect(padded.length % 8).toBe(0);
  });

  test("round-trips every dtype with zero-copy views into one mapping", () => {
    const path = fresh();
    const tensors: TensorToWrite[] = [
      { name: "f64", dtype: "F64", shape: [3], data: bytesOf(new Float64Array([Math.PI, -0, 1e-300])) },
      { name: "f32", dtype: "F32", shape: [2, 2], data: bytesOf(new Float32Array([1, 2, 3, Number.NaN])) },
      { name: "f16", dtype: "F16", shape: [2], data: bytesOf(new Uint16Array([0x3c00, 0xc000])) },
      { name: "i64", dtype: "I64", shape: [2], data: bytesOf(new BigInt64Array([-1n, 2n ** 40n])) },
      { name: "empty", dtype: "F32", shape: [0, 4], data: new Uint8Array(0) },
      { name: "scalar", dtype: "I32", shape: [], data: bytesOf(new Int32Array([7])) },
    ];
    writeSafetensors(path, tensors, { step: "3" });
    const file = readSafetensors(path);
    expect(file.metadata).toEqual({ format: "pt", step: "3" });
    expect([...file.tensors.keys()]).toEqual(["empty", "f16", "f32", "f64", "i64", "scalar"]);
    for (const t of tensors) {
      const view = file.tensors.get(t.name)!;
      expect(view.dtype).toBe(t.dtype);
      expect(view.shape).toEqual(t.shape);
      expect(view.data).toEqual(t.data as Uint8Array);
    }
    expect(file.tensors.get("f32")!.data.buffer).toBe(file.tensors.get("i64")!.data.buffer);
  });

  test("calls a lazy data function once and rejects a wrong byte count naming the tensor", () => {
    let calls = 0;
    const path = fresh();
    writeSafetensors(path, [
      { name: "w", dtype: "F32", shape: [1], data: () => (calls++, bytesOf(new Float32Array([4]))) },
    ]);
    expect(calls).toBe(1);
    expect(new Float32Array(readSafetensors(path).tensors.get("w")!.data.slice().buffer)[0]).toBe(4);
    expectFileError(
      () => writeSafetensors(fresh(), [{ name: "w", dtype: "F32", shape: [2], data: new Uint8Array(4) }]),
      "tensor w",
      "got 4 bytes",
      "needs 8",
    );
  });

  test("reads a file from another writer: unpadded header, tensors out of order, no metadata", () => {
    const data = bytesOf(new Float32Array([5, 6, 7]));
    const header =
      '{"z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}';
    const path = handMade(header, data);
    const file = readSafetensors(path);
    expect(file.metadata).toEqual({});
    expect(Array.from(new Float32Array(file.tensors.get("y")!.data.slice().buffer))).toEqual([6, 7]);
    expect(header.length % 8).not.toBe(0);
    expect(file.tensors.get("z")!.offset).toBe(8 + header.length);
    expect(file.tensors.get("y")!.offset).toBe(8 + header.length + 4);
  });
});

describe("safetensors reader errors name the file, the tensor and the byte offset", () => {
  const oneF32 = '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}';

  test("a file shorter than the length prefix", () => {
    const path = fresh();
    writeFileSync(path, new Uint8Array(5));
    expectFileError(() => readSafetensors(path), path, "truncated", "5 bytes");
  });

  test("a header length beyond the file", () => {
    const path = handMade(oneF32, new Uint8Array(8), 1n << 40n);
    expectFileError(() => readSafetensors(path), path, "header length 1099511627776 at byte 0 runs past the end");
  });

  test("bad header JSON", () => {
    const path = handMade('{"w":{"dtype":"F32",', new Uint8Array(8));
    expectFileError(() => readSafetensors(path), path, "bad header JSON in bytes 8..28");
  });

  test("truncated tensor data", () => {
    const path = handMade(oneF32, new Uint8Array(6));
    expectFileError(
      () => readSafetensors(path),
      path,
      "truncated",
      "tensor w",
      `ends at byte ${8 + oneF32.length + 8}`,
    );
  });

  test("an unknown dtype", () => {
    const path = handMade('{"w":{"dtype":"F8_E9M9","shape":[1],"data_offsets":[0,1]}}', new Uint8Array(1));
    expectFileError(() => readSafetensors(path), path, "tensor w", 'unknown dtype "F8_E9M9"');
  });

  test("overlapping data ranges", () => {
    const header =
      '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}';
    const path = handMade(header, new Uint8Array(8));
    expectFileError(() => readSafetensors(path), path, "tensors a and b overlap", `at byte ${8 + header.length + 4}`);
  });

  test("data_offsets that disagree with the shape", () => {
    const path = handMade('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', new Uint8Array(8));
    expectFileError(() => readSafetensors(path), "tensor w", "hold 8 bytes", "needs 12");
  });

  test("a missing file", () => {
    expectFileError(() => readSafetensors(join(root, "nope.safetensors")), "nope.safetensors", "not found");
  });
});

describe("safetensors model directories", () => {
  const tensors: TensorToWrite[] = ["a", "b", "c", "d", "e"].map((name, i) => ({
    name,
    dtype: "F32",
    shape: [4 + i],
    data: bytesOf(new Float32Array(4 + i).fill(i)),
  }));

  test("writes one model.safetensors when under the shard size", () => {
    const dir = mkdtempSync(join(root, "single-"));
    const written = writeSafetensorsDir(dir, tensors);
    expect(Object.keys(written)).toEqual([SINGLE_FILE]);
    // the checksum returned is the file's on disk, as Python's zlib.crc32 would compute it
    expect(written[SINGLE_FILE]).toMatchObject(checksumFile(join(dir, SINGLE_FILE)));
    expect(Object.keys(written[SINGLE_FILE]!.tensors!)).toEqual(["a", "b", "c", "d", "e"]);
    expect([...readSafetensorsDir(dir).keys()]).toEqual(["a", "b", "c", "d", "e"]);
  });

  test("shards by size with a transformers-style index and reads every tensor back", () => {
    const dir = mkdtempSync(join(root, "sharded-"));
    const files = Object.keys(writeSafetensorsDir(dir, tensors, 40)); // 16+20 | 24 | 28 | 32 bytes
    expect(files).toEqual([shardName(0, 4), shardName(1, 4), shardName(2, 4), shardName(3, 4), INDEX_FILE]);
    expect(shardName(0, 4)).toBe("model-00001-of-00004.safetensors");
    const index = JSON.parse(readFileSync(join(dir, INDEX_FILE), "utf8"));
    expect(index.metadata.total_size).toBe(4 * (4 + 5 + 6 + 7 + 8));
    expect(index.weight_map).toEqual({
      a: shardName(0, 4),
      b: shardName(0, 4),
      c: shardName(1, 4),
      d: shardName(2, 4),
      e: shardName(3, 4),
    });
    expect(existsSync(join(dir, SINGLE_FILE))).toBe(false);
    const read = readSafetensorsDir(dir);
    for (const t of tensors) expect(read.get(t.name)!.data).toEqual(t.data as Uint8Array);
  });

  test("an index naming a missing shard or a tensor the shard lacks is an error naming both", () => {
    const dir = mkdtempSync(join(root, "broken-"));
    writeSafetensorsDir(dir, tensors, 40);
    const indexPath = join(dir, INDEX_FILE);
    const index = JSON.parse(readFileSync(indexPath, "utf8"));
    writeFileSync(indexPath, JSON.stringify({ ...index, weight_map: { ...index.weight_map, ghost: shardName(0, 4) } }));
    expectFileError(
      () => readSafetensorsDir(dir),
      shardName(0, 4),
      "tensor ghost",
      "listed in model.safetensors.index.json",
    );
    writeFileSync(indexPath, JSON.stringify({ weight_map: { a: "model-00009-of-00009.safetensors" } }));
    expectFileError(
      () => readSafetensorsDir(dir),
      INDEX_FILE,
      "shard model-00009-of-00009.safetensors (holding a) not found",
    );
  });

  test("a directory without weights says so", () => {
    expectFileError(
      () => readSafetensorsDir(mkdtempSync(join(root, "empty-"))),
      "neither model.safetensors nor model.safetensors.index.json",
    );
  });
});
