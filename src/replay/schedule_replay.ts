// A policy engine's schedule record (src/engine/schedule.ts) read back and replayed: the same
// generator calls, in the same order, on the same weights versions and thread counts, give back
// every request's tokens and logprobs. What decided them at run time (arrivals, swaps landing
// between two decode steps, the cores a trainer left free) is in the record, so the replay needs no
// timing of its own.
//
// A record is replayed from its start (the engine's start): the generator's prefix cache and its
// K/V placement carry over from every earlier request, so there is no later point to begin at.
// The cost is that of regenerating everything the engine ran up to the last line needed.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { RlxError } from "../errors.ts";
import type { ReloadHow, ScheduleHeader } from "../engine/schedule.ts";
import { directorySource } from "../engine/reloads.ts";
import { check, loadNative } from "../native/ffi.ts";
import { type GenToken, NativeGenerator, type SamplingParams } from "../native/generate.ts";
import type { NativeModel } from "../native/model.ts";
import type { DType } from "../data/dtypes.ts";
import { weightsDir } from "../rundir/paths.ts";

const KEEP_FIX =
  'run with ckpt.keep_steps = true (and with inference.weight_transfer = "c10d", publish_every = 1): replay loads every weights version the policy used';

export type ScheduleEvent =
  | { a: ({ i: number } | RecordedRequest)[]; n: number }
  | { s: number }
  | { r: number }
  | { f: number; n: number }
  | { v: number; how: ReloadHow; dir?: string }
  | { t: number }
  | { x: 1 };

export interface RecordedRequest {
  i: number;
  tag?: string;
  p: number[];
  m: [number, number, number, number, number];
  stop?: number[];
}

export interface ScheduleFile {
  path: string;
  header: ScheduleHeader;
  events: ScheduleEvent[];
}

/** One request as the replay produced it, with the record's length for it where it finished. */
export interface ReplayedRequest {
  id: number;
  tag?: string;
  prompt: number[];
  tokens: number[];
  logprobs: number[];
  /** The weights version each token was sampled with. */
  versions: number[];
  /** Tokens the record says it finished with (undefined: it did not finish in the record). */
  recordedLength?: number;
}

/** Reads a record; a last line cut short (the process was killed mid-write) is left out. */
export function readSchedule(path: string): ScheduleFile {
  const text = readFileSync(path, "utf8");
  const whole = text.endsWith("\n") ? text : text.slice(0, text.lastIndexOf("\n") + 1);
  const lines = whole.split("\n").filter((line) => line !== "");
  const parse = (line: string, at: number): unknown => {
    try {
      return JSON.parse(line);
    } catch {
      throw new RlxError(`${path}: line ${at + 1} is not JSON`, {
        fix: "the schedule record is damaged; replay another step or run",
      });
    }
  };
  const header = parse(lines[0] ?? "null", 0) as ScheduleHeader | null;
  if (header?.schedule !== 1)
    throw new RlxError(`${path}: no schedule header on line 1`, { fix: "pass a file rlx wrote in RUN/schedule/" });
  return { path, header, events: lines.slice(1).map((line, i) => parse(line, i + 1) as ScheduleEvent) };
}

function samplingOf(r: RecordedRequest): SamplingParams {
  const [temperature, topP, topK, maxNewTokens, seed] = r.m;
  return { temperature, topP, topK, maxNewTokens, seed, stopTokenIds: r.stop ?? [] };
}

/** A model directory or adapter (a c10d step's directory holds only its marker). */
const hasWeights = (dir: string) =>
  existsSync(join(dir, "config.json")) || existsSync(join(dir, "adapter_config.json"));

/** What the engine started from: the directory it loaded, or (a checkpoint since pruned) the
 * weights the run published at that version, the same bits. */
function startingWeights({ path, header }: ScheduleFile, runDir: string): string {
  if (hasWeights(header.model)) return header.model;
  const published = weightsDir(runDir, header.version);
  if (header.version > 0 && hasWeights(published)) return published;
  throw new RlxError(`${header.model} is gone: ${path} started from it (weights version ${header.version})`, {
    fix: KEEP_FIX,
  });
}

/**
 * Replays `file`'s events [0, until) on the weights the run kept (a version's directory as the
 * record names it, else RUN/weights/step_V), and returns every request it ran, by id.
 */
export async function replaySchedule(
  file: ScheduleFile,
  runDir: string,
  until = file.events.length,
): Promise<Map<number, ReplayedRequest>> {
  const { header } = file;
  const lib = await loadNative();
  check(lib, lib.rlx_set_threads(header.threads));
  const { loadModel, adapterSwap } = await import("../model/hf.ts");
  const load = (dir: string) => loadModel(dir, { dtype: header.dtype as DType, device: header.device });
  let model = await load(startingWeights(file, runDir));
  let version = header.version;
  const newGenerator = (m: NativeModel) =>
    NativeGenerator.create(m, {
      slots: header.slots,
      capacity: header.capacity,
      kvTokens: header.kv_tokens,
      keepPrefixes: header.prefix_caching,
      prefillTokens: header.prefill_tokens,
    });
  let generator = newGenerator(model);
  const requests = new Map<number, ReplayedRequest>();
  const sampling = new Map<number, SamplingParams>();
  const slotOf = new Map<number, number>();
  const idAt = new Map<number, number>();
  const deliver = (produced: GenToken[]) => {
    for (const t of produced) {
      const id = idAt.get(t.slot);
      if (id === undefined) continue;
      const request = requests.get(id)!;
      request.tokens.push(t.token);
      request.logprobs.push(t.logprob);
      request.versions.push(version);
      if (t.finish !== null) release(id);
    }
  };
  const release = (id: number) => {
    const slot = slotOf.get(id);
    if (slot === undefined) return;
    slotOf.delete(id);
    idAt.delete(slot);
  };
  try {
    for (const event of file.events.slice(0, until)) {
      if ("a" in event) {
        const ids = event.a.map((entry) => {
          if ("p" in entry) {
            requests.set(entry.i, {
              id: entry.i,
              ...(entry.tag === undefined ? {} : { tag: entry.tag }),
              prompt: entry.p,
              tokens: [],
              logprobs: [],
              versions: [],
            });
            sampling.set(entry.i, samplingOf(entry));
          }
          return entry.i;
        });
        const first = generator.add(
          ids.map((id) => ({ prompt: requests.get(id)!.prompt, sampling: sampling.get(id)! })),
        );
        first.forEach((t, j) => {
          slotOf.set(ids[j]!, t.slot);
          idAt.set(t.slot, ids[j]!);
        });
        deliver(first);
      } else if ("s" in event) {
        for (let k = 0; k < event.s; k++) deliver(generator.step());
      } else if ("r" in event) {
        const slot = slotOf.get(event.r);
        if (slot !== undefined) generator.remove(slot);
        release(event.r);
      } else if ("f" in event) {
        const request = requests.get(event.f);
        if (request) request.recordedLength = event.n;
        // still running here (the replay diverged): ended where the record ended it, so what
        // follows keeps the record's batches
        const slot = slotOf.get(event.f);
        if (slot !== undefined) generator.remove(slot);
        release(event.f);
      } else if ("v" in event) {
        // the directory the engine loaded, or (a transfer, a run directory moved since) the run's own
        const published = weightsDir(runDir, event.v);
        const dir = [event.dir, published].find((d) => d !== undefined && hasWeights(d));
        if (dir === undefined)
          throw new RlxError(
            `${published} holds no weights: ${file.path} swapped in weights version ${event.v}, which the replay needs`,
            { fix: KEEP_FIX },
          );
        const fetched = await directorySource(dir, load, async (m, d) => adapterSwap(m, d)).fetch(model);
        if ("swap" in fetched) {
          fetched.swap();
          generator.setModel(model); // as the engine does: no K/V of the old adapter is reused
        } else {
          if (event.how === "in-flight") generator.setModel(fetched.model);
          else {
            generator.free();
            generator = newGenerator(fetched.model);
            slotOf.clear();
            idAt.clear();
          }
          model.free();
          model = fetched.model;
        }
        version = event.v;
      } else if ("t" in event) {
        check(lib, lib.rlx_set_threads(event.t));
      } else if ("x" in event) {
        generator.free();
        generator = newGenerator(model);
        slotOf.clear();
        idAt.clear();
      }
    }
  } finally {
    generator.free();
    model.free();
  }
  return requests;
}
