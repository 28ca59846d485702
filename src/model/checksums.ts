// Checksums of the files rlx writes and later trusts: model directories (published weights,
// checkpoints' weights, `rlx init` output) carry `checksums.json`, checkpoints a manifest, step
// files a CRC in their preamble (docs/run-directory.md, "Integrity"). A size check catches a
// truncated file; only a checksum catches bytes flipped in place, which otherwise load as weights.
//
// The hash is CRC-32 (zlib's polynomial, as Python's `zlib.crc32` and `crc32` tools compute it),
// through Bun's native Bun.hash.crc32: ~28 GB/s here, about twice xxHash64's speed in the same
// runtime, and it chains (`crc32(b, crc32(a)) == crc32(a + b)`), so a file is hashed as it is
// streamed to disk, without a second pass or holding it whole. It detects corruption, not
// tampering: whoever can write the file can rewrite its checksum. Checking a directory against
// recorded checksums is integrity.ts.
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { join } from "node:path";

export const CHECKSUM_ALGORITHM = "crc32";
/** The file in a model directory that records its files' checksums. */
export const CHECKSUMS_FILE = "checksums.json";

/** One file's size and CRC-32 (8 hex digits); safetensors files also per tensor, to name the damaged one. */
export interface FileChecksum {
  bytes: number;
  crc32: string;
  tensors?: Record<string, string>;
}

/** Relative path -> its checksum. */
export type Checksums = Record<string, FileChecksum>;

/** The CRC-32 of `data`, continuing from `previous` (the CRC of the bytes before it). */
export const crc32 = (data: Uint8Array, previous = 0): number => Bun.hash.crc32(data, previous);

export const hex = (crc: number) => (crc >>> 0).toString(16).padStart(8, "0");

const CHUNK = 16 << 20;

/** Size and CRC-32 of a file on disk, read in chunks. */
export function checksumFile(path: string): FileChecksum {
  const fd = openSync(path, "r");
  try {
    const buffer = new Uint8Array(Math.min(CHUNK, Math.max(1, statSync(path).size)));
    let crc = 0;
    let bytes = 0;
    for (let n; (n = readSync(fd, buffer, 0, buffer.byteLength, null)) > 0; bytes += n)
      crc = crc32(buffer.subarray(0, n), crc);
    return { bytes, crc32: hex(crc) };
  } finally {
    closeSync(fd);
  }
}

/** Checksums of the named files of `dir`. */
export function checksumFiles(dir: string, files: readonly string[]): Checksums {
  return Object.fromEntries(files.map((file) => [file, checksumFile(join(dir, file))]));
}

/** The text of a model directory's checksums.json. */
export function checksumsFileText(files: Checksums): string {
  return `${JSON.stringify({ format: 1, algorithm: CHECKSUM_ALGORITHM, files }, null, 1)}\n`;
}
