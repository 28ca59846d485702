// Checking files against the checksums recorded when they were written (checksums.ts): used on
// load (model directories), on resume (checkpoints) and by `rlx check`. A damaged file is named,
// and a damaged safetensors file also names the tensors whose bytes changed, so "which weights
// are wrong" has an answer.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ChecksumError } from "../errors.ts";
import {
  CHECKSUM_ALGORITHM,
  type Checksums,
  CHECKSUMS_FILE,
  checksumFile,
  crc32,
  type FileChecksum,
  hex,
} from "./checksums.ts";
import { readSafetensors } from "./safetensors.ts";

/**
 * Problems of `dir` against recorded checksums, [] when every file is whole. Each names the file;
 * a damaged safetensors file also names the tensors whose bytes changed (or its header).
 */
export function verifyChecksums(dir: string, expected: Checksums): string[] {
  const problems: string[] = [];
  for (const [file, want] of Object.entries(expected)) {
    const path = join(dir, file);
    if (!existsSync(path)) {
      problems.push(`${file} is missing`);
      continue;
    }
    const size = statSync(path).size;
    if (size !== want.bytes) {
      problems.push(`${file} has ${size} bytes, ${want.bytes} were written (truncated or damaged)`);
      continue;
    }
    const got = checksumFile(path).crc32;
    if (got === want.crc32) continue;
    problems.push(`${file}: checksum mismatch (crc32 ${got}, written as ${want.crc32})${where(path, want)}`);
  }
  return problems;
}

/** ": tensor X" for a damaged safetensors file whose tensors were checksummed, else "". */
function where(path: string, want: FileChecksum): string {
  if (!want.tensors) return "";
  let tensors;
  try {
    tensors = readSafetensors(path).tensors;
  } catch {
    return ": its header is damaged";
  }
  const damaged = Object.entries(want.tensors)
    .filter(([name, crc]) => {
      const view = tensors.get(name);
      return view === undefined || hex(crc32(view.data)) !== crc;
    })
    .map(([name]) => name);
  if (damaged.length === 0) return ": its header is damaged";
  return `: tensor${damaged.length > 1 ? "s" : ""} ${damaged.join(", ")}`;
}

/** Throws a ChecksumError naming every damaged file of `dir`, if any (`what` says what `dir` is). */
export function assertWhole(dir: string, problems: readonly string[], what: string): void {
  if (problems.length > 0)
    throw new ChecksumError(`${what} ${dir} is damaged: ${problems.join("; ")}`, {
      fix: "its bytes changed after rlx wrote them (disk, copy or filesystem fault): use another copy or checkpoint",
    });
}

/**
 * Problems of a model directory against its checksums.json, [] when whole or when it has none (a
 * model from the Hub, or one written before rlx recorded checksums). Only the weight files are
 * recorded there: config.json and the tokenizer files are meant to be edited by hand.
 */
export function checkModelDir(dir: string): string[] {
  const path = join(dir, CHECKSUMS_FILE);
  if (!existsSync(path)) return [];
  let recorded: { algorithm?: string; files?: Checksums };
  try {
    recorded = JSON.parse(readFileSync(path, "utf8")) as typeof recorded;
  } catch (err) {
    return [`${CHECKSUMS_FILE} does not parse: ${(err as Error).message}`];
  }
  if (recorded.algorithm !== CHECKSUM_ALGORITHM || typeof recorded.files !== "object")
    return [`${CHECKSUMS_FILE} is not a ${CHECKSUM_ALGORITHM} checksum list`];
  return verifyChecksums(dir, recorded.files);
}
