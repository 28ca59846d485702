// The schedule record's own cost (src/engine/schedule.ts), without a training run's noise: the
// batching engine generating a quickstart step's rollouts (GROUPS groups of 8 sampled completions
// of a 2-digit sum in the bare format, up to 8 tokens each, seeded) on the `tiny` preset, with the
// record on and off, alternating which goes first, ROUNDS rounds. Prints each round's seconds both
// ways, the median ratio on/off, the time spent inside the recorder's calls (timed around each) as
// a share of the step, and the record's bytes a step. bench/schedule_record.sh times
// whole runs (the quickstart and the three-env mix) the same way.
//
//   bun bench/schedule_engine.ts [--groups 32] [--max-batch 64] [--rounds 7] [--threads N]
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../src/engine/engine.ts";
import { ScheduleRecorder } from "../src/engine/schedule.ts";
import { PRESETS } from "../src/model/presets.ts";
import { loadNative } from "../src/native/ffi.ts";
import { NativeModel } from "../src/native/model.ts";
import { runtimeInfo } from "../src/native/runtime.ts";
import { flag, median } from "./_reference.ts";

const groups = Number(flag("groups", "32"));
const maxBatch = Number(flag("max-batch", "64"));
const rounds = Number(flag("rounds", "7"));
await loadNative(Number(flag("threads", String(cpus().length))));
const info = await runtimeInfo();
const preset = PRESETS.tiny!;
using model = await NativeModel.create(preset.config.shim, { seed: 0 });
const dir = mkdtempSync(join(tmpdir(), "rlx-schedule-bench-"));

// every recorder call timed (the engine calls them synchronously, between its native calls)
let inRecorder = 0;
for (const name of ["add", "step", "remove", "finish", "reload", "threads", "close"] as const) {
  const call = ScheduleRecorder.prototype[name] as (...args: unknown[]) => void;
  (ScheduleRecorder.prototype as unknown as Record<string, unknown>)[name] = function (
    this: ScheduleRecorder,
    ...args: unknown[]
  ) {
    const started = performance.now();
    call.apply(this, args);
    inRecorder += performance.now() - started;
  };
}

const bytes = (text: string) => Array.from(new TextEncoder().encode(text));
const prompts = Array.from({ length: groups }, (_, g) => bytes(`${10 + ((g * 37) % 89)}+${10 + ((g * 53) % 89)}=`));

/** One step's rollouts through a fresh engine; returns its seconds and the record's bytes. */
async function step(record: boolean, round: number): Promise<{ seconds: number; bytes: number }> {
  const path = join(dir, `r${round}-${record}.jsonl`);
  const engine = new Engine(model, {
    maxBatch,
    maxModelLen: 256,
    ownsModel: false,
    reloadMode: "in-flight",
    ...(record ? { schedule: { path, model: "tiny" } } : {}),
  });
  const started = performance.now();
  await Promise.all(
    prompts.flatMap((prompt, g) =>
      Array.from({ length: 8 }, (_, k) =>
        engine.submit({
          prompt,
          sampling: { temperature: 1, maxNewTokens: 8, seed: (round + 1) * 10_000 + g * 8 + k },
          tag: `g${g}-${k}`,
        }),
      ),
    ),
  );
  const seconds = (performance.now() - started) / 1000;
  await engine.close();
  return { seconds, bytes: record ? statSync(path).size : 0 };
}

console.log(
  `schedule_engine: ${info.threads} threads, ${groups * 8} rollouts of up to 8 tokens a step, max batch ${maxBatch}, torch ${info.torch_version}`,
);
await step(true, -1); // warm-up
const ratios: number[] = [];
const shares: number[] = [];
let recorded = 0;
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? [true, false] : [false, true];
  const times = new Map<boolean, number>();
  for (const record of order) {
    inRecorder = 0;
    const { seconds, bytes } = await step(record, round);
    times.set(record, seconds);
    if (record) ((recorded = bytes), shares.push(inRecorder / 1000 / seconds));
  }
  ratios.push(times.get(true)! / times.get(false)!);
  console.log(
    `round ${round + 1}: on ${times.get(true)!.toFixed(3)} s (${(shares.at(-1)! * 100).toFixed(2)}% in the recorder), off ${times.get(false)!.toFixed(3)} s: ${ratios.at(-1)!.toFixed(3)}x`,
  );
}
console.log(
  `median on/off ${median(ratios).toFixed(3)}x; in the recorder ${(median(shares) * 100).toFixed(2)}% of the step; the record ${(recorded / 1024).toFixed(1)} KiB a step`,
);
rmSync(dir, { recursive: true, force: true });
