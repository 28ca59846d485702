// The orchestrator's own work per step, against the trainer step it feeds, in one command: a
// synthetic 256-rollout step (32 groups of 8) goes through the code paths src/orchestrator/loop.ts
// runs between "the rollouts have finished" and "the step file is on disk", per algorithm, and the
// same packed step is trained once by the `tiny` preset as the baseline.
//
//   OMP_WAIT_POLICY=PASSIVE bun bench/orchestrator.ts [--rounds 3] [--orch-reps 5] [--shapes math,tool]
//     [--algos grpo,max_rl,echo,sft] [--seq-len 2048] [--train-rows N] [--threads N] [--seed 1]
//
// Timed phases, each a median over rounds x orch-reps passes (the phases take milliseconds, so a
// round repeats them to keep a GC pause from deciding a figure; every pass rebuilds the rollouts
// untimed, since scoring annotates them in place):
//   score       finishRollout on each rollout, then finishGroup on each group (algo/base.ts)
//   build       rolloutToSamples + the zero-advantage filter (src/orchestrator/collect.ts's buildSamples)
//   pack        packStep at orchestrator.seq_len
//   step file   the policy-version stamp of the rows, the rollout metrics, writeStepBatch (encode,
//               write, rename) into a temp directory
//   audit       rollouts/step_N.jsonl, one audit line per kept sample (src/rundir/audit.ts's writeAudit; on by
//               default: log.rollouts_interval = 1)
// Rollout shapes: `math` is single-turn (~40 prompt, 20-60 sampled tokens); `tool` is three model
// turns of ~50 sampled tokens after a ~1,000-token system + user prompt, with ~50-token tool
// outputs between them (~1,250 tokens, 150 sampled). Each group draws a pass rate, then 0/1
// rewards from it, so some groups are uniform and the filter has work to do.
//
// The trainer baseline is src/trainer/step.ts's trainStep over nativeLearner (every row forward +
// backward, then AdamW), with the row calls and the optimizer step timed apart. `--train-rows N`
// trains only the first N rows (with the whole step's denominators) and scales the row time by
// tokens, all / timed; the optimizer step is counted once, unscaled. The default trains every row.
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import type { Task } from "../src/envs/types.ts";
import { Rng } from "../src/envs/random.ts";
import type { ChatMessage } from "../src/data/chat.ts";
import { PRESETS } from "../src/model/presets.ts";
import { loadNative } from "../src/native/ffi.ts";
import { NativeModel } from "../src/native/model.ts";
import { NativeOptimizer } from "../src/native/train.ts";
import { type Algorithm, finishGroup, finishRollout } from "../src/algorithms/base.ts";
import { algorithmName, createAlgorithm, parseAlgoConfig } from "../src/algorithms/registry.ts";
import { type BatchSample, writeStepBatch } from "../src/rundir/step_file.ts";
import { buildSamples } from "../src/orchestrator/collect.ts";
import { writeAudit } from "../src/rundir/audit.ts";
import { rolloutMetrics } from "../src/orchestrator/metrics/rollouts.ts";
import { type PackedStep, packStep } from "../src/data/pack.ts";
import type { Rollout, Segment } from "../src/data/types.ts";
import { denominatorsOf, nativeLearner, type Learner, trainStep } from "../src/trainer/step.ts";
import { flag, median, printTable } from "./_reference.ts";
import { rlLoss } from "../src/data/loss_types.ts";

const GROUPS = 32;
const GROUP_SIZE = 8;
const LOSS = rlLoss();
/** Chat-template scaffold around a message body (`<|im_start|>role\n` ... `<|im_end|>\n`). */
const HEAD = 3;
const TAIL = 2;

// ---- synthetic rollouts, shaped as src/rollout/driver.ts builds them ----

const tokens = (rng: Rng, n: number) => Array.from({ length: n }, () => rng.int(3, 258));

/** A rendered message that the model did not sample: scaffold, body, scaffold. */
function context(rng: Rng, role: Segment["role"], n: number, messageIndex: number): Segment {
  const isContent = Array.from({ length: n }, (_, i) => i >= HEAD && i < n - TAIL);
  return { role, tokenIds: tokens(rng, n), sampled: false, isContent, messageIndex, sample: 0 };
}

/** A model turn: its generation prompt (context), then the sampled tokens with their logprobs. */
function turn(rng: Rng, n: number, messageIndex: number): Segment[] {
  const prompt: Segment = {
    role: "assistant",
    tokenIds: tokens(rng, HEAD),
    sampled: false,
    isContent: [false, false, false],
    messageIndex,
    sample: 0,
  };
  const logprobs = Array.from({ length: n }, () => -2 * rng.next());
  const isContent = Array.from({ length: n }, (_, i) => i < n - 1);
  return [
    prompt,
    {
      role: "assistant",
      tokenIds: tokens(rng, n),
      sampled: true,
      logprobs,
      isContent,
      messageIndex,
      sample: 0,
      policyVersion: 0,
      temperature: 1,
    },
  ];
}

interface Shape {
  /** The task prompt's segments (shared by the group) and the messages they render. */
  prompt(rng: Rng): { segments: Segment[]; messages: ChatMessage[] };
  /** The rest of one rollout after the prompt; turns = number of sampled segments. */
  episode(rng: Rng, firstMessage: number): { segments: Segment[]; messages: ChatMessage[] };
}

const SHAPES: Record<string, Shape> = {
  math: {
    prompt: (rng) => ({
      segments: [context(rng, "user", rng.int(30, 50), 0)],
      messages: [{ role: "user", content: "What is 17 * 23?" }],
    }),
    episode: (rng, first) => ({
      segments: turn(rng, rng.int(20, 60), first),
      messages: [{ role: "assistant", content: "391" }],
    }),
  },
  tool: {
    prompt: (rng) => ({
      segments: [context(rng, "system", rng.int(650, 750), 0), context(rng, "user", rng.int(250, 340), 1)],
      messages: [
        { role: "system", content: "tools" },
        { role: "user", content: "task" },
      ],
    }),
    episode: (rng, first) => {
      const segments: Segment[] = [];
      const messages: ChatMessage[] = [];
      for (let t = 0; t < 3; t++) {
        const assistant = first + 2 * t;
        segments.push(...turn(rng, rng.int(35, 65), assistant));
        messages.push({ role: "assistant", content: "call" });
        if (t === 2) break;
        // rest of the assistant's closing scaffold, then the tool output
        segments.push({
          role: "assistant",
          tokenIds: tokens(rng, 1),
          sampled: false,
          isContent: [false],
          messageIndex: assistant,
          sample: 0,
        });
        segments.push(context(rng, "tool", rng.int(35, 60), assistant + 1));
        messages.push({ role: "tool", content: "output", name: "run" });
      }
      return { segments, messages };
    },
  },
};

function makeGroups(shapeName: string, shape: Shape, seed: number): Rollout[][] {
  const rng = new Rng(seed);
  return Array.from({ length: GROUPS }, (_, g) => {
    const prompt = shape.prompt(rng);
    const passRate = rng.next();
    const task: Task = { id: `${shapeName}-${g}`, prompt: prompt.messages, answer: "391" };
    return Array.from({ length: GROUP_SIZE }, (_, i): Rollout => {
      const episode = shape.episode(rng, prompt.messages.length);
      const reward = rng.next() < passRate ? 1 : 0;
      const segments = [...prompt.segments.map((s) => ({ ...s })), ...episode.segments];
      return {
        id: `s1/g${g}/r${i}`,
        env: shapeName,
        taskId: task.id,
        groupId: `s1/g${g}`,
        task,
        messages: [...prompt.messages, ...episode.messages],
        segments,
        numSamples: 1,
        reward,
        metrics: { correct: reward },
        stopReason: "done",
        policyVersion: 0,
        numTurns: segments.filter((s) => s.sampled).length,
        info: {},
      };
    });
  });
}

// ---- the orchestrator's phases ----

interface Phases {
  ms: { score: number; build: number; pack: number; stepFile: number; audit: number };
  packed: PackedStep;
  kept: number;
}

async function orchestratorRound(
  shapeName: string,
  algorithm: Algorithm<any>,
  seed: number,
  runDir: string,
): Promise<Phases> {
  const groups = makeGroups(shapeName, SHAPES[shapeName]!, seed);
  const t0 = performance.now();
  for (const group of groups) {
    for (const rollout of group) await finishRollout(algorithm, rollout);
    await finishGroup(algorithm, group);
  }
  const t1 = performance.now();
  const algo = algorithmName(algorithm);
  const { kept } = buildSamples(
    groups,
    [{ resolved: { name: shapeName }, lossType: algorithm.kind.actionLossType, algoName: algo }],
    true,
  );
  const t2 = performance.now();
  const packed = packStep(
    kept.map((k) => k.sample),
    { seqLen: seqLen },
  );
  const t3 = performance.now();
  const versions = new Map(groups.flat().map((r) => [r.id, r.policyVersion]));
  const rows = packed.rows.map((row) => ({
    ...row,
    samples: row.samples.map((s): BatchSample => ({ ...s, policyVersion: versions.get(s.rolloutId) ?? -1 })),
  }));
  const metrics = {
    ...rolloutMetrics(groups.flat(), [shapeName]),
    "batch/samples": kept.length,
    "batch/rows": rows.length,
  };
  writeStepBatch(join(runDir, "batches", "step_1.bin"), { step: 1, packed: { ...packed, rows }, metrics });
  const t4 = performance.now();
  writeAudit(runDir, 1, kept);
  const t5 = performance.now();
  return {
    ms: { score: t1 - t0, build: t2 - t1, pack: t3 - t2, stepFile: t4 - t3, audit: t5 - t4 },
    packed,
    kept: kept.length,
  };
}

// ---- the trainer baseline ----

/** Trains the first `trainRows` rows (0 = all) of the step; the step's estimated ms. */
function trainerRound(policy: Learner, packed: PackedStep, trainRows: number): number {
  let rowsMs = 0;
  let optimMs = 0;
  const timed: Learner = {
    trainRow(row, numEnvs, n, losses) {
      const t0 = performance.now();
      const result = policy.trainRow(row, numEnvs, n, losses);
      rowsMs += performance.now() - t0;
      return result;
    },
    optimizerStep(lr, maxGradNorm) {
      const t0 = performance.now();
      const result = policy.optimizerStep(lr, maxGradNorm);
      optimMs += performance.now() - t0;
      return result;
    },
  };
  const rows = trainRows > 0 ? packed.rows.slice(0, trainRows) : packed.rows;
  const result = trainStep(
    timed,
    { ...packed, rows },
    { lr: 1e-6, maxGradNorm: 1, losses: [LOSS], denominators: denominatorsOf(packed.rows) },
  );
  if (!Number.isFinite(result.metrics.loss)) throw new Error(`trainer loss is not finite (${result.metrics.loss})`);
  const all = packed.rows.reduce((n, r) => n + r.tokenIds.length, 0);
  const trained = rows.reduce((n, r) => n + r.tokenIds.length, 0);
  return rowsMs * (all / trained) + optimMs;
}

// ---- main ----

const rounds = Number(flag("rounds", "3"));
const orchReps = Number(flag("orch-reps", "5"));
const shapeNames = flag("shapes", "math,tool").split(",");
const algoNames = flag("algos", "grpo,max_rl,echo,sft").split(",");
const seqLen = Number(flag("seq-len", "2048"));
const trainRows = Number(flag("train-rows", "0"));
const seed = Number(flag("seed", "1"));
const threads = Number(flag("threads", String(cpus().length)));
await loadNative(threads);

/** A built-in algorithm through the registry's parser and createAlgorithm, as the config layer does.
 * sft must sample from a frozen model; creating it connects nothing (setup would). */
async function algorithmOf(type: string): Promise<Algorithm<any>> {
  if (!["grpo", "max_rl", "echo", "sft"].includes(type))
    throw new Error(`--algos: ${type} is not one of grpo, max_rl, echo, sft (opd and opsd call a model)`);
  const sampling = type === "sft" ? { source: { name: "teacher", base_url: "http://127.0.0.1:9/v1" } } : {};
  const config = parseAlgoConfig({ type, sampling }, { source: "bench", path: ["algo"] });
  return (await createAlgorithm(config, { source: "bench", path: ["algo"] }, { isPolicyUrl: () => false })).algorithm;
}

const runDir = mkdtempSync(join(tmpdir(), "rlx-bench-orch-"));
for (const dir of ["batches", "rollouts"]) mkdirSync(join(runDir, dir));
const preset = PRESETS.tiny!;
console.log(
  `${GROUPS} groups x ${GROUP_SIZE} rollouts; seq_len ${seqLen}; ${rounds} rounds x ${orchReps} orchestrator passes, ${rounds} trainer steps (medians); trainer: tiny preset, ${threads} threads, f32`,
);
if (trainRows > 0)
  console.log(
    `trainer step ms: the first ${trainRows} rows are trained and their time scaled by tokens (all rows / timed rows), plus one optimizer step`,
  );

const table: (string | number)[][] = [
  [
    "shape",
    "algorithm",
    "score ms",
    "build+filter ms",
    "pack ms",
    "step-file ms",
    "audit ms",
    "total ms",
    "trainer step ms",
    "overhead %",
  ],
];
try {
  for (const shapeName of shapeNames) {
    if (!SHAPES[shapeName]) throw new Error(`--shapes: unknown shape ${shapeName} (math, tool)`);
    using model = await NativeModel.create(preset.config.shim, { seed: 0 });
    using optim = NativeOptimizer.create(model, { weightDecay: 0.01 });
    const policy = nativeLearner(model, optim);
    for (const algoName of algoNames) {
      const algorithm = await algorithmOf(algoName);
      const warm = await orchestratorRound(shapeName, algorithm, seed, runDir);
      trainerRound(policy, { ...warm.packed, rows: warm.packed.rows.slice(0, 1) }, 0);
      const phases: Phases["ms"][] = [];
      const stepMs: number[] = [];
      for (let r = 0; r < rounds; r++) {
        for (let k = 0; k < orchReps; k++)
          phases.push((await orchestratorRound(shapeName, algorithm, seed, runDir)).ms);
        stepMs.push(trainerRound(policy, warm.packed, trainRows));
      }
      const { packed } = warm;
      const timedRows = trainRows > 0 ? Math.min(trainRows, packed.rows.length) : packed.rows.length;
      console.log(
        `${shapeName} ${algoName}: ${warm.kept} of ${GROUPS * GROUP_SIZE} samples kept, ${packed.tokens} tokens in ${packed.rows.length} rows (counts rl ${packed.counts.rl}, ce ${packed.counts.ce}); trainer timed ${timedRows} rows`,
      );
      const m = (pick: (p: Phases["ms"]) => number) => median(phases.map(pick));
      const total = m((p) => p.score + p.build + p.pack + p.stepFile + p.audit);
      const step = median(stepMs);
      table.push([
        shapeName,
        algoName,
        m((p) => p.score).toFixed(1),
        m((p) => p.build).toFixed(1),
        m((p) => p.pack).toFixed(1),
        m((p) => p.stepFile).toFixed(1),
        m((p) => p.audit).toFixed(1),
        total.toFixed(1),
        step.toFixed(0),
        `${((100 * total) / step).toFixed(2)}%`,
      ]);
    }
  }
} finally {
  rmSync(runDir, { recursive: true, force: true });
}
console.log();
printTable(table);
