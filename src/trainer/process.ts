// The trainer process (`rlx trainer`, started by `rlx train`; docs/architecture.md §2): loads the model through
// the shim, then for each step waits for `batches/step_N.bin`, runs the step driver over it with
// the scheduled learning rate, publishes the new weights as `weights/step_N/` (or, with
// inference.weight_transfer = "c10d", sends them over the weight channels, weight_send.ts, or
// SGLang's update groups, engine_send.ts) and, on checkpoint steps, writes `checkpoints/step_N/`.
//
// Why a separate process: bun:ffi calls are synchronous, so a training step would freeze the
// orchestrator's rollouts for its whole duration; as a child it overlaps with rollout generation
// (the async RL of docs/architecture.md §10), and a native crash takes down only the trainer, which the
// orchestrator reports with its last log lines.
//
// Publishing (publish.ts): saveModel writes the HF directory atomically (tmp + rename); then the
// marker `published.json` (the step's metrics: the trainer's, and the orchestrator's passed
// through from the step file, so a line of metrics.jsonl can be rebuilt from the marker alone
// after a kill) is written into it, also by tmp + rename. A reader acts on the marker only, so it
// never loads a half-written model. The marker is last. A SIGTERM between steps checkpoints the
// last finished step (ckpt.on_sigterm) before the trainer exits.
//
// Orphans: the trainer exits when its parent dies (even by SIGKILL), by watching the parent pid.
//
// Data-parallel ranks (trainer.world_size > 1, docs/scaling.md): every rank runs this same loop.
// They join a c10d group before loading anything, all load the same files and check that their
// weights (and a restored optimizer state) are identical, then read every whole step file and
// train their balanced share of it (src/trainer/ranks.ts). Only rank 0 publishes weights, writes
// checkpoints and the marker, and deletes the step file: every rank has read the file before it
// passes the gradient all-reduce, so rank 0 cannot delete it under another rank. The AdamW state
// is identical on every rank (same summed gradient, same update), so rank 0's checkpoint restores
// them all.
//
// Sharded ranks (trainer.shard, docs/scaling.md): the model is sharded right after loading (a
// one-rank group when world_size is 1), so each rank keeps its slices. Publishing a "full" model
// gathers it tensor by tensor, every rank taking part (publish.ts followStep); checkpoints are
// written by every rank together, each its slices, and the ranks agree before each step whether to
// go on, so a SIGTERM stops and checkpoints them at the same step.
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import { RlxError } from "../errors.ts";
import { ensureLora } from "../model/adapter.ts";
import { loadModel } from "../model/hf.ts";
import { CoreShare } from "../native/core_share.ts";
import { ProcessGroup, type StoreSpec } from "../native/dist.ts";
import { deviceMemory } from "../native/runtime.ts";
import { NativeOptimizer } from "../native/train.ts";
import { costModelOf } from "./balance.ts";
import { batchPath } from "../rundir/paths.ts";
import { readStepBatch } from "../rundir/step_file.ts";
import { isCheckpointStep, type LoadedCheckpoint, readCheckpoint } from "../rundir/checkpoint.ts";
import { restoreShardedCheckpoint, restoreWholeCheckpoint, restoreWholeOptimizer } from "../rundir/shard_restore.ts";
import type { NativeModel } from "../native/model.ts";
import { checkpoint, followStep, publishStep, type Trained, writesShards } from "./publish.ts";
import { trainStepOnRank } from "./ranks.ts";
import { EngineGroups } from "./engine_send.ts";
import { followSend, WeightChannels } from "./weight_send.ts";
import { learningRate } from "./schedule.ts";
import { nativeLearner, type Learner, trainStep } from "./step.ts";
import { runLoss } from "../algorithms/loss_schema.ts";

export interface TrainerOptions {
  runDir: string;
  config: ResolvedConfig;
  /** A checkpoint directory to restore weights and optimizer state from; training continues at its step + 1. */
  resumeFrom?: string;
  /** Exit when this process is gone (the orchestrator). */
  parentPid?: number;
  pollMs?: number;
  log?: (line: string) => void;
  /** This process's data-parallel rank, 0..trainer.world_size-1 (default 0). */
  rank?: number;
  /** Where the ranks meet; required when trainer.world_size > 1. */
  store?: StoreSpec;
}

function parentAlive(pid: number | undefined): boolean {
  if (pid === undefined) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits for `path`; false when `stop` fires first (a SIGTERM). */
async function waitForFile(path: string, opts: TrainerOptions, stop: AbortSignal): Promise<boolean> {
  const poll = opts.pollMs ?? 20;
  let checked = performance.now();
  while (!existsSync(path)) {
    if (stop.aborted) return false;
    await Bun.sleep(poll);
    if (performance.now() - checked > 500) {
      checked = performance.now();
      if (!parentAlive(opts.parentPid))
        throw new RlxError(`the orchestrator (pid ${opts.parentPid}) is gone; the trainer stops`);
    }
  }
  return true;
}

/** trainer.dist.backend, "auto" resolved: NCCL on a cuda device, Gloo on cpu. */
function backendOf(t: ResolvedConfig["trainer"]): "gloo" | "nccl" {
  return t.dist.backend === "auto" ? (t.device.startsWith("cuda") ? "nccl" : "gloo") : t.dist.backend;
}

/** Joins the ranks' group: blocks until all have joined, or throws after trainer.dist.timeout_s. */
async function joinGroup(opts: TrainerOptions, rank: number): Promise<ProcessGroup> {
  const t = opts.config.trainer;
  if (!opts.store)
    throw new RlxError(
      `trainer.world_size is ${t.world_size}, but rank ${rank} was given no store to meet the others at`,
      { fix: "start the ranks with rlx train, or pass --store" },
    );
  if (!Number.isInteger(rank) || rank < 0 || rank >= t.world_size)
    throw new RlxError(`rank ${rank} is not in 0..${t.world_size - 1} (trainer.world_size ${t.world_size})`);
  const backend = backendOf(t);
  return ProcessGroup.create({
    rank,
    worldSize: t.world_size,
    store: opts.store,
    timeoutMs: t.dist.timeout_s * 1000,
    backend,
  });
}

/**
 * Restores a checkpoint's training state into the loaded (and, with trainer.shard, sharded) model
 * and its optimizer. A sharded checkpoint reshards to this run's ranks and mode (every rank reads
 * only the pieces of its own slices; collective); a whole one loads the same AdamW image on every
 * rank, checked identical, or each rank's part of it into a sharded model.
 */
function restore(
  restored: LoadedCheckpoint,
  model: NativeModel,
  optimizer: NativeOptimizer,
  group: ProcessGroup | null,
) {
  if (restored.sharded) {
    if (model.shardGroup) restoreShardedCheckpoint(restored.dir, model, optimizer, group!);
    else restoreWholeCheckpoint(restored.dir, model, optimizer);
    return;
  }
  if (model.shardGroup && !model.lora) {
    // an unsharded checkpoint, resumed sharded: the weights came whole from it, the AdamW state is cut
    restoreWholeOptimizer(join(restored.dir, "trainer/optimizer.bin"), model, optimizer);
    return;
  }
  optimizer.loadState(restored.optimizerState());
  if (group) verifyOptimizerState(group, optimizer.saveState());
}

/** True when every rank found the step file, false when any was stopped (collective: a rank
 * that found it waits here for the others' answer rather than entering the step alone). */
function agreeToGo(group: ProcessGroup, present: boolean): boolean {
  const stopped = BigInt64Array.of(present ? 0n : 1n);
  group.allreduce(stopped, "max");
  return stopped[0] === 0n;
}

/** The one-rank group a sharded trainer of world_size 1 slices over (a file store of its own). */
async function soloGroup(t: ResolvedConfig["trainer"]): Promise<ProcessGroup> {
  const path = join(tmpdir(), `rlx-trainer-${process.pid}.store`);
  rmSync(path, { force: true });
  const backend = backendOf(t);
  return ProcessGroup.create({ rank: 0, worldSize: 1, store: { type: "file", path }, backend });
}

/** Throws unless every rank restored the same optimizer state (weights: verifyParams). */
function verifyOptimizerState(group: ProcessGroup, image: Uint8Array): void {
  const digest = BigInt64Array.of(BigInt.asIntN(64, BigInt(Bun.hash(image))));
  const low = digest.slice();
  const high = digest.slice();
  group.allreduce(low, "min");
  group.allreduce(high, "max");
  if (low[0] !== high[0]) {
    throw new RlxError(`rank ${group.rank} of ${group.worldSize}: the ranks restored different optimizer states`, {
      fix: "every rank must read the same checkpoint (a filesystem every node sees)",
    });
  }
}

/** The learner taking its threads from the core share before each micro-batch and update. */
function sharingCores(learner: Learner, cores: CoreShare): Learner {
  return {
    trainRow: (...args) => (cores.apply(), learner.trainRow(...args)),
    optimizerStep: (...args) => (cores.apply(), learner.optimizerStep(...args)),
  };
}

/** Runs the trainer until `max_steps` is trained. */
export async function runTrainer(opts: TrainerOptions): Promise<void> {
  const { runDir, config } = opts;
  const log = opts.log ?? ((line: string) => console.log(line));
  const restored = opts.resumeFrom ? readCheckpoint(opts.resumeFrom) : undefined;
  // a sharded checkpoint's weights are its ranks' slices, restored once the model is sharded
  const sourceDir = restored && !restored.sharded ? restored.modelDir : config.model.path;
  const startStep = (restored?.step ?? 0) + 1;
  const t = config.trainer;
  const rank = opts.rank ?? 0;
  const lead = rank === 0;
  const onGpu = t.device.startsWith("cuda");
  const who = t.world_size > 1 ? `trainer rank ${rank}` : "trainer";
  // join first: a rank that cannot reach the others fails before the slow model load
  using group = t.world_size > 1 ? await joinGroup(opts, rank) : t.shard !== "none" ? await soloGroup(t) : null;
  if (lead) mkdirSync(join(runDir, "weights"), { recursive: true });

  // float32 masters for full fine-tuning; with [model.lora] the frozen base stays in model.dtype
  // (bf16 on a GPU, as the policy holds it) and only the float32 adapters train
  const baseDtype = config.model.lora ? config.model.dtype : "f32";
  using model = await loadModel(sourceDir, { dtype: baseDtype, device: t.device });
  // [model.lora]: adapters beside the frozen base (a checkpoint's come back with it); the same
  // seed on every rank gives every rank the same initial adapters
  ensureLora(model, config.model.lora, config.seed, "config.resolved.toml");
  if (t.precision === "bf16-autocast") model.setOption("autocast_bf16", true);
  if (group) group.verifyParams(model); // the whole weights, before any rank keeps only its slices
  if (t.shard !== "none") group!.shard(model, t.shard);
  // trainer.context_parallel: ranks r - r % C .. of one replica split each of its rows
  const split = t.context_parallel;
  using context =
    split > 1 ? group!.subgroup(Array.from({ length: split }, (_, i) => rank - (rank % split) + i)) : null;
  context?.splitRows(model);
  model.activationCheckpointing = t.activation_checkpointing;
  const [beta1, beta2] = t.optim.betas;
  using optimizer = NativeOptimizer.create(model, {
    beta1,
    beta2,
    eps: t.optim.eps,
    weightDecay: t.optim.weight_decay,
  });
  if (restored) restore(restored, model, optimizer, group);
  const cores = CoreShare.fromEnv("trainer");
  const learner = cores ? sharingCores(nativeLearner(model, optimizer), cores) : nativeLearner(model, optimizer);
  const dp = group ? { group, model, cost: costModelOf(model.config), shard: t.shard, contextParallel: split } : null;
  // inference.weight_transfer = "c10d": rank 0 waits here until every policy process has joined
  const inMemory = config.inference.weight_transfer === "c10d";
  using channels =
    !inMemory || !lead
      ? null
      : config.inference.engine === "sglang"
        ? await EngineGroups.open(runDir, model, config, log)
        : await WeightChannels.open(runDir, log);
  const loaded = restored?.sharded ? `${restored.dir} (its shards)` : sourceDir;
  const sharding = (t.shard === "none" ? "" : `, shard ${t.shard}`) + (split > 1 ? `, context parallel ${split}` : "");
  log(
    `${who}: ${loaded} loaded, training steps ${startStep}..${config.max_steps}${group ? ` (${group.worldSize} rank${group.worldSize > 1 ? "s" : ""}, ${group.backend}${sharding})` : ""}`,
  );

  // SIGTERM (a scheduler's pre-emption, or rlx train stopping): its handler runs between steps,
  // when the model holds the weights of the last finished one; the loop then checkpoints that step
  // (ckpt.on_sigterm) and returns.
  const stop = new AbortController();
  const onTerm = () => stop.abort();
  process.on("SIGTERM", onTerm);
  let last: Trained | undefined;
  // Sharded checkpoints are collective, and the ranks see a SIGTERM at different moments: before
  // each step they agree whether to go on, so all stop (and checkpoint) together or none does.
  const collective = !!group && group.worldSize > 1 && writesShards(model, group);
  try {
    for (let step = startStep; step <= config.max_steps; step++) {
      const waitStart = performance.now();
      const file = batchPath(runDir, step);
      // a SIGTERM stops at this boundary even when the next step's file is already there: one turn
      // of the event loop lets its handler run (a step is synchronous, and a present file is not
      // waited for)
      await Bun.sleep(0);
      const present = (await waitForFile(file, opts, stop.signal)) && !stop.signal.aborted;
      if (!(collective ? agreeToGo(group!, present) : present)) {
        // rank 0 writes a whole checkpoint; a sharded one every rank, together
        const due = last && config.ckpt.on_sigterm && !isCheckpointStep(last.step, config);
        if (due && (lead || collective))
          log(`${who}: SIGTERM: wrote the checkpoint of step ${last!.step}: ${checkpoint(last!)}`);
        else log(`${who}: SIGTERM: stopping`);
        return;
      }
      const batch = readStepBatch(file);
      if (batch.step !== step)
        throw new RlxError(`${file} holds step ${batch.step}`, {
          fix: "the run directory is inconsistent; resume from a checkpoint",
        });
      const trainStart = performance.now();
      const lr = learningRate(step, t.optim.lr, t.schedule, config.max_steps);
      // the step's loss table; a step file written before per-env losses: [trainer.loss] for all
      const losses = batch.packed.losses ?? [runLoss(config)];
      const stepOptions = { lr, maxGradNorm: t.optim.max_norm, losses };
      cores?.busy(true);
      const result = dp
        ? trainStepOnRank(dp, learner, batch.packed, stepOptions)
        : trainStep(learner, batch.packed, stepOptions);
      cores?.busy(false);
      if (onGpu) {
        // the step's peak of the CUDA caching allocator, then a new peak for the next step
        const memory = await deviceMemory(t.device, true);
        Object.assign(result.metrics, { "memory/peak_gib": memory.peak, "memory/reserved_gib": memory.reserved });
      }
      const trained: Trained = {
        group,
        runDir,
        config,
        step,
        model,
        optimizer,
        // config.json and the tokenizer files come from the run's model: the checkpoint the weights
        // were restored from is pruned once ckpt.keep newer ones exist
        sourceDir: config.model.path,
        state: batch.state,
      };
      last = trained;
      if (!lead) {
        followStep(trained);
        if (inMemory) followSend(model, config);
        log(
          `${who}: step ${step} loss ${result.metrics.loss?.toFixed(4)} micro_batches ${result.metrics.micro_batches} ${((performance.now() - trainStart) / 1000).toFixed(2)}s`,
        );
        continue;
      }

      if (batch.state === undefined) throw new RlxError(`${file} has no orchestrator state`);
      const marker = publishStep(
        last,
        { step, orchestrator: batch.metrics ?? {}, metrics: result.metrics, perEnv: result.perEnv },
        { wait: (trainStart - waitStart) / 1000, train: (performance.now() - trainStart) / 1000 },
      );
      // after the marker: the orchestrator sees it and has the policy receive what is sent
      const sent = channels?.send(model, config, step, log);
      const m = result.metrics;
      log(
        `${who}: step ${step} loss ${m.loss?.toFixed(4)} grad_norm ${m.grad_norm?.toFixed(3)} lr ${lr.toExponential(2)} tokens ${m.tokens} ${marker.timing.train.toFixed(2)}s${sent ? ` sent ${(sent.bytes / 2 ** 20).toFixed(1)} MiB in ${sent.seconds.toFixed(2)}s` : ""}`,
      );
    }
  } finally {
    process.off("SIGTERM", onTerm);
  }
}
