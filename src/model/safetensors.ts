// safetensors files: read (memory-mapped, zero-copy) and write (streamed, one tensor at a time).
//
// Format: u64 little-endian header length N, then N bytes of JSON
// {"__metadata__": {...}, NAME: {"dtype", "shape", "data_offsets": [begin, end]}, ...}, then the
// data section; offsets are relative to its start (byte 8 + N).
//
// Why built this way:
//   - Reads mmap the file (Bun.mmap) and hand out subarrays of the mapping, so a tensor goes to the
//     shim without a copy; a 1.2 GB checkpoint costs no JS heap.
//   - Everything in the header is checked before any tensor is used, and each error names the
//     file, the tensor and the byte offset: a truncated download or a hand-edited header must be a
//     clear ModelFileError, never garbage weights.
//   - Writes use synchronous fs calls (an un-awaited Bun.write followed by an mmap of the same
//     file was seen to read stale bytes). Tensor data can be given lazily, so a saver fetches one parameter
//     from the shim at a time instead of holding the whole model in JS memory.
//   - The header is padded with spaces to a multiple of 8 so the data section starts 8-byte
//     aligned (and each tensor is aligned to its element size when all share one dtype, the usual
//     case); tensors are written in name order, which makes files byte-reproducible.
import { closeSync, existsSync, openSync, readFileSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { ModelFileError } from "../errors.ts";
import { type Checksums, checksumFile, crc32, type FileChecksum, hex } from "./checksums.ts";

/** Bytes per element of each dtype rlx understands (safetensors spelling). */
export const DTYPE_BYTES = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U8: 1,
  BOOL: 1,
} as const;

/** A safetensors dtype name rlx can read. */
export type SafetensorsDtype = keyof typeof DTYPE_BYTES;

/** One tensor of a file: a zero-copy view of its bytes inside the mapping. */
export interface TensorView {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** The raw little-endian bytes (a subarray of the mmap). */
  data: Uint8Array;
  /** The file the tensor lives in, for error messages. */
  file: string;
  /** Absolute byte offset of the data in the file. */
  offset: number;
}

/** A parsed safetensors file. */
export interface SafetensorsFile {
  path: string;
  /** Tensors by name, in header order. */
  tensors: Map<string, TensorView>;
  /** The `__metadata__` string map (empty when absent). */
  metadata: Record<string, string>;
}

const fail = (file: string, what: string): never => {
  throw new ModelFileError(`${file}: ${what}`, {
    fix: "the file is damaged or not a safetensors file; re-download or re-save the model",
  });
};

/** Reads and validates a safetensors file. Tensor data stays in the mapping (zero-copy). */
export function readSafetensors(path: string): SafetensorsFile {
  if (!existsSync(path)) fail(path, "not found");
  const size = statSync(path).size;
  if (size < 8) fail(path, `truncated: ${size} bytes, shorter than the 8-byte header length`);
  const bytes = Bun.mmap(path);
  const headerLength = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (headerLength > BigInt(size - 8)) {
    fail(path, `header length ${headerLength} at byte 0 runs past the end of the file (${size} bytes)`);
  }
  const dataStart = 8 + Number(headerLength);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, dataStart)));
  } catch (err) {
    fail(path, `bad header JSON in bytes 8..${dataStart}: ${(err as Error).message}`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header))
    fail(path, "header at byte 8 is not a JSON object");

  const metadata: Record<string, string> = {};
  const tensors = new Map<string, TensorView>();
  const dataLength = size - dataStart;
  for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (typeof entry === "object" && entry !== null) Object.assign(metadata, entry);
      continue;
    }
    const where = `tensor ${name}`;
    if (typeof entry !== "object" || entry === null) fail(path, `${where}: header entry is not an object`);
    const { dtype, shape, data_offsets: offsets } = entry as Record<string, unknown>;
    if (typeof dtype !== "string" || !(dtype in DTYPE_BYTES)) {
      fail(path, `${where}: unknown dtype ${JSON.stringify(dtype)} (rlx reads ${Object.keys(DTYPE_BYTES).join(", ")})`);
    }
    if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
      fail(path, `${where}: bad shape ${JSON.stringify(shape)}`);
    }
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every((o) => Number.isInteger(o) && o >= 0) ||
      offsets[0] > offsets[1]
    ) {
      fail(path, `${where}: bad data_offsets ${JSON.stringify(offsets)}`);
    }
    const [begin, end] = offsets as [number, number];
    const needed = (shape as number[]).reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype as SafetensorsDtype];
    if (end - begin !== needed) {
      fail(
        path,
        `${where}: data_offsets [${begin}, ${end}] hold ${end - begin} bytes, but ${dtype} ${JSON.stringify(shape)} needs ${needed}`,
      );
    }
    if (end > dataLength) {
      fail(path, `truncated: ${where} data ends at byte ${dataStart + end}, past the end of the file (${size} bytes)`);
    }
    tensors.set(name, {
      name,
      dtype: dtype as SafetensorsDtype,
      shape: shape as number[],
      data: bytes.subarray(dataStart + begin, dataStart + end),
      file: path,
      offset: dataStart + begin,
    });
  }
  checkNoOverlap(path, [...tensors.values()]);
  return { path, tensors, metadata };
}

function checkNoOverlap(path: string, views: TensorView[]): void {
  const sorted = views.filter((v) => v.data.byteLength > 0).sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1]!;
    const cur = sorted[i]!;
    if (cur.offset < prev.offset + prev.data.byteLength) {
      fail(path, `tensors ${prev.name} and ${cur.name} overlap at byte ${cur.offset}`);
    }
  }
}

/** A tensor to write: bytes given directly, or produced on demand when the writer reaches it. */
export interface TensorToWrite {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** Exactly numel * DTYPE_BYTES[dtype] bytes, or a function returning them (called once). */
  data: Uint8Array | (() => Uint8Array);
}

/** The byte size of a tensor's data. */
export function tensorBytes(dtype: SafetensorsDtype, shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
}

/** The header bytes (length prefix + space-padded JSON) for tensors in the order given. */
function encodeHeader(tensors: readonly TensorToWrite[], metadata: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    const n = tensorBytes(t.dtype, t.shape);
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + n] };
    offset += n;
  }
  let json = JSON.stringify(header);
  const length = new TextEncoder().encode(json).byteLength;
  json += " ".repeat((8 - (length % 8)) % 8);
  const body = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + body.byteLength);
  new DataView(out.buffer).setBigUint64(0, BigInt(body.byteLength), true);
  out.set(body, 8);
  return out;
}

/**
 * Writes a safetensors file, tensors in name order, `__metadata__` {"format": "pt", ...metadata};
 * returns its size and CRC-32, and each tensor's, computed from the bytes as they are written.
 */
export function writeSafetensors(
  path: string,
  tensors: readonly TensorToWrite[],
  metadata: Record<string, string> = {},
): FileChecksum {
  const ordered = [...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (let i = 1; i < ordered.length; i++) {
    if (ordered[i]!.name === ordered[i - 1]!.name)
      throw new ModelFileError(`${path}: tensor ${ordered[i]!.name} given twice`);
  }
  const fd = openSync(path, "w");
  try {
    const header = encodeHeader(ordered, { format: "pt", ...metadata });
    writeAll(fd, header);
    let crc = crc32(header);
    let bytes = header.byteLength;
    const perTensor: Record<string, string> = {};
    for (const t of ordered) {
      const data = typeof t.data === "function" ? t.data() : t.data;
      const expected = tensorBytes(t.dtype, t.shape);
      if (data.byteLength !== expected) {
        throw new ModelFileError(
          `${path}: tensor ${t.name}: got ${data.byteLength} bytes, ${t.dtype} ${JSON.stringify(t.shape)} needs ${expected}`,
        );
      }
      writeAll(fd, data);
      crc = crc32(data, crc);
      bytes += data.byteLength;
      perTensor[t.name] = hex(crc32(data));
    }
    return { bytes, crc32: hex(crc), tensors: perTensor };
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, data: Uint8Array): void {
  let done = 0;
  while (done < data.byteLength) done += writeSync(fd, data, done, data.byteLength - done);
}

// ---- model directories: one model.safetensors, or shards named by model.safetensors.index.json ----

/** The single-file checkpoint name. */
export const SINGLE_FILE = "model.safetensors";
/** The index of a sharded checkpoint: {"metadata": {"total_size"}, "weight_map": {tensor: shard file}}. */
export const INDEX_FILE = "model.safetensors.index.json";

/** Every tensor of a model directory, from model.safetensors or from the shards the index names. */
export function readSafetensorsDir(dir: string): Map<string, TensorView> {
  const indexPath = join(dir, INDEX_FILE);
  if (!existsSync(indexPath)) {
    const single = join(dir, SINGLE_FILE);
    if (!existsSync(single)) {
      throw new ModelFileError(`${dir}: neither ${SINGLE_FILE} nor ${INDEX_FILE} found`, {
        fix: "point at a Hugging Face model directory with safetensors weights (rlx does not read .bin/.pth)",
      });
    }
    return readSafetensors(single).tensors;
  }
  let weightMap: unknown;
  try {
    weightMap = (JSON.parse(readFileSync(indexPath, "utf8")) as { weight_map?: unknown }).weight_map;
  } catch (err) {
    fail(indexPath, `not valid JSON (${(err as Error).message})`);
  }
  if (typeof weightMap !== "object" || weightMap === null) fail(indexPath, "weight_map: missing or not an object");
  const byShard = new Map<string, string[]>();
  for (const [name, shard] of Object.entries(weightMap as Record<string, unknown>)) {
    if (typeof shard !== "string" || shard.includes("/"))
      fail(indexPath, `weight_map.${name}: bad shard file name ${JSON.stringify(shard)}`);
    byShard.set(shard as string, [...(byShard.get(shard as string) ?? []), name]);
  }
  const all = new Map<string, TensorView>();
  for (const [shard, names] of byShard) {
    const shardPath = join(dir, shard);
    if (!existsSync(shardPath)) fail(indexPath, `shard ${shard} (holding ${names[0]}) not found`);
    const { tensors } = readSafetensors(shardPath);
    for (const name of names) {
      const view = tensors.get(name);
      if (!view) fail(shardPath, `tensor ${name}: listed in ${INDEX_FILE} but not in this shard`);
      all.set(name, view!);
    }
  }
  return all;
}

/** Shard file names in the transformers convention: model-00001-of-00003.safetensors. */
export function shardName(index: number, count: number): string {
  const pad = (n: number) => String(n).padStart(5, "0");
  return `model-${pad(index + 1)}-of-${pad(count)}.safetensors`;
}

/**
 * Writes tensors into `dir` as model.safetensors, or, when they exceed `shardBytes`, as shards of at
 * most that size (a larger tensor gets a shard of its own) plus the index. Returns the checksum of
 * each file written, by name.
 */
export function writeSafetensorsDir(dir: string, tensors: readonly TensorToWrite[], shardBytes = Infinity): Checksums {
  const ordered = [...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const shards: TensorToWrite[][] = [];
  let current: TensorToWrite[] = [];
  let currentBytes = 0;
  for (const t of ordered) {
    const n = tensorBytes(t.dtype, t.shape);
    if (current.length > 0 && currentBytes + n > shardBytes) {
      shards.push(current);
      current = [];
      currentBytes = 0;
    }
    current.push(t);
    currentBytes += n;
  }
  shards.push(current);
  if (shards.length === 1) return { [SINGLE_FILE]: writeSafetensors(join(dir, SINGLE_FILE), ordered) };
  const weightMap: Record<string, string> = {};
  const files: Checksums = {};
  shards.forEach((group, i) => {
    const file = shardName(i, shards.length);
    files[file] = writeSafetensors(join(dir, file), group);
    for (const t of group) weightMap[t.name] = file;
  });
  const totalSize = ordered.reduce((sum, t) => sum + tensorBytes(t.dtype, t.shape), 0);
  writeFileSync(
    join(dir, INDEX_FILE),
    JSON.stringify({ metadata: { total_size: totalSize }, weight_map: weightMap }, null, 2) + "\n",
  );
  return { ...files, [INDEX_FILE]: checksumFile(join(dir, INDEX_FILE)) };
}
