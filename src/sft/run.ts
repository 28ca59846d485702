// `rlx sft`: supervised fine-tuning on a JSONL dataset, on the same native trainer RL uses. The
// loss is the trainer's `ce` component alone (docs/architecture.md §6: sum of -logprob over target tokens /
// the step's target-token count), fed by the ce weight stream that marks what each assistant turn
// generates (tokens.ts); packing and the step driver are RL's (pack.ts, step.ts). This is
// how a model made from scratch gets its first skills before RL: with all-zero rewards GRPO has
// nothing to learn from.
//
// One step: take the next examples up to `batch_tokens`, pack them into rows of `seq_len`, forward
// and backward every row, one AdamW update at the schedule's learning rate. Every `eval.interval`
// steps (and before the first and after the last) the live model is evaluated in-process on the
// eval envs' held-out tasks; with `[eval.stop]` the run ends at the first eval inside the score
// band (band.ts). The run directory gets config.resolved.toml, metrics.jsonl (one line
// per step, eval keys as eval/<env>/pass@1 so `rlx report` charts them), checkpoints/step_N/ every
// `save.interval` steps, and the final model in model/ (HF layout: `rlx eval`, `rlx serve` and
// `rlx train` load it).
//
// Checkpoints are `rlx train`'s (src/rundir/checkpoint.ts: f32 weights, AdamW state, manifest
// last, atomic rename); their orchestrator.json holds this loop's state (SftState: the batcher's
// cursor and the summary's running totals; resume.ts). `--resume` continues from the newest whole one as if
// the run had not stopped: same step numbers, the same batches in the same order, the same
// learning rates, metrics.jsonl rewound to the checkpoint's step, no step-0 eval. A SIGTERM (a
// scheduler's pre-emption) is handled between steps: the last finished step is checkpointed
// (`save.on_sigterm`) and the run returns `stopped` without a final model, for --resume.
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify as stringifyToml } from "smol-toml";
import { dataPaths, type SftConfig } from "./config.ts";
import { EnvError } from "../errors.ts";
import { LocalClient } from "../engine/local.ts";
import { ensureLora } from "../model/adapter.ts";
import { loadModel, saveModel } from "../model/hf.ts";
import { ChatRenderer } from "../model/render.ts";
import { Tokenizer } from "../model/tokenizer.ts";
import { loadNative } from "../native/ffi.ts";
import type { NativeModel } from "../native/model.ts";
import { NativeOptimizer } from "../native/train.ts";
import { rewindRunDir, writeCheckpoint } from "../rundir/checkpoint.ts";
import { metricsPath } from "../rundir/paths.ts";
import { TensorBoardLog } from "../rundir/tensorboard.ts";
import { type EnvEval, evalMetrics, evaluate, failedRolloutsLine, loadEvalTasks } from "../eval/evaluate.ts";
import { remoteSettings } from "../envs/index.ts";
import { learningRate } from "../trainer/schedule.ts";
import { type SftExample, SftBatches } from "./batches.ts";
import { readSftRows } from "./data.ts";
import { type BandRecord, BandWatch } from "./band.ts";
import { checkRunDir, dataFingerprint, RUN_FILES, type SftState, sftState } from "./resume.ts";
import { tokenizeConversationSamples } from "./tokens.ts";
import { nativeLearner, trainStep } from "../trainer/step.ts";
import { rlLoss } from "../data/loss_types.ts";

export interface SftSummary {
  steps: number;
  /** Wall time of the step loop, evals and saves included. */
  seconds: number;
  /** Time inside optimizer steps (forward, backward, update). */
  trainSeconds: number;
  tokens: number;
  examples: number;
  epochs: number;
  /** Examples longer than seq_len (truncated in every step they appear in). */
  truncatedExamples: number;
  firstNll: number;
  lastNll: number;
  modelDir: string;
  outputDir: string;
  evalBefore: EnvEval[];
  evalAfter: EnvEval[];
  /** Where `[eval.stop]` stopped the run (also in <output_dir>/band.json). */
  band?: BandRecord;
  /** A SIGTERM stopped the run after `steps` (checkpointed with save.on_sigterm); no model/ was saved. */
  stopped?: "SIGTERM";
}

export interface SftOptions {
  /** A progress line (one per step, plus eval and save notes). */
  log?: (line: string) => void;
  /** A checkpoint skipped on --resume (partial or damaged). */
  warn?: (line: string) => void;
  /** Continue the run in output_dir from its newest whole checkpoint. */
  resume?: boolean;
  /** Start over in an output_dir that already holds a run (its metrics, checkpoints and model are deleted). */
  force?: boolean;
}

/** Reads and tokenizes the dataset; every row must keep a target token inside seq_len. */
export function prepareExamples(
  renderer: ChatRenderer,
  paths: string[],
  seqLen: number,
  templateArgs: Record<string, unknown> = {},
): SftExample[] {
  return readSftRows(paths).flatMap((conv) =>
    tokenizeConversationSamples(renderer, conv, templateArgs).map(({ tokenIds, ceWeights }, k, all) => {
      const id = all.length > 1 ? `${conv.where}#${k}` : conv.where;
      // A row's first token is never predicted, and tokens past seq_len are cut off.
      if (!ceWeights.slice(1, seqLen).some((w) => w !== 0)) {
        throw new EnvError(
          `${conv.where}: no target token within the first ${seqLen} tokens (the row has ${tokenIds.length}), so it cannot train`,
          {
            fix: "raise trainer.seq_len, or shorten the row's prompt",
          },
        );
      }
      return { id, env: conv.env, tokenIds, ceWeights };
    }),
  );
}

/** Optimizer steps in `epochs` passes over the data at this batch size (a dry run of the batcher). */
export function stepsForEpochs(
  examples: readonly SftExample[],
  options: ConstructorParameters<typeof SftBatches>[1],
  epochs: number,
): number {
  const batches = new SftBatches(examples, options);
  let steps = 0;
  while (batches.epochs < epochs - 1e-9) (batches.next(), steps++);
  return Math.max(1, steps);
}

async function evalAll(
  model: NativeModel,
  renderer: ChatRenderer,
  config: SftConfig,
  envs: Awaited<ReturnType<typeof loadEvalTasks>>[],
): Promise<EnvEval[]> {
  const settings = config.eval!;
  const client = LocalClient.fromModel(model, {
    maxBatch: 32,
    ...(settings.max_model_len ? { maxModelLen: settings.max_model_len } : {}),
  });
  try {
    const results: EnvEval[] = [];
    for (const [i, { name, env, tasks }] of envs.entries()) {
      const entry = settings.env[i]!;
      results.push(
        await evaluate(client, renderer, name, env, tasks, {
          k: entry.k ?? settings.k,
          temperature: entry.temperature ?? settings.temperature,
          maxTokens: entry.max_tokens ?? settings.max_tokens,
          greedy: settings.greedy,
          seed: config.seed,
          maxContextTokens: client.engine.maxModelLen,
          templateArgs: config.chat_template_kwargs,
        }),
      );
    }
    return results;
  } finally {
    await client.close();
  }
}

const fmtLr = (lr: number) => lr.toExponential(1);

/** Runs SFT to completion (or from a checkpoint to completion, with `resume`); returns what the summary table prints. */
export async function runSft(config: SftConfig, options: SftOptions = {}): Promise<SftSummary> {
  const log = options.log ?? ((line: string) => console.log(line));
  const warn = options.warn ?? ((line: string) => console.error(`warning: ${line}`));
  const t = config.trainer;
  const runDir = config.output_dir;
  const checkpoint = checkRunDir(runDir, options, warn);
  await loadNative(t.threads);
  const renderer = new ChatRenderer(Tokenizer.load(config.model.path));
  const examples = prepareExamples(renderer, dataPaths(config), t.seq_len, config.chat_template_kwargs);
  const batchOptions = {
    batchTokens: t.batch_tokens,
    seqLen: t.seq_len,
    seed: config.seed,
    shuffle: config.data.shuffle,
  };
  const totalSteps = t.steps ?? stepsForEpochs(examples, batchOptions, t.epochs);
  const data = dataFingerprint(examples, config);
  const resumed = checkpoint && sftState(checkpoint, data, totalSteps);
  const truncatedExamples = examples.filter((e) => e.tokenIds.length > t.seq_len).length;
  const dataTokens = examples.reduce((n, e) => n + e.tokenIds.length, 0);
  const evalEnvs = config.eval
    ? await Promise.all(
        config.eval.env.map((e) =>
          loadEvalTasks({
            id: e.id,
            name: e.name,
            args: e.args,
            remote: remoteSettings(e.remote),
            numExamples: config.eval!.num_examples,
            seed: config.seed,
          }),
        ),
      )
    : [];
  log(
    `sft: ${examples.length} examples (${dataTokens.toLocaleString("en-US")} tokens, ${truncatedExamples} longer than seq_len ${t.seq_len}), ${totalSteps} steps of ${t.batch_tokens} tokens`,
  );

  // Nothing in output_dir changes until the config, the data and the checkpoint have all checked out.
  if (checkpoint) {
    rewindRunDir(runDir, checkpoint.step);
    log(`sft: resuming after step ${checkpoint.step} from ${checkpoint.dir}`);
  } else if (options.force) {
    for (const name of [...RUN_FILES, "model", "config.resolved.toml"])
      rmSync(join(runDir, name), { recursive: true, force: true });
  }
  mkdirSync(runDir, { recursive: true });
  writeFileSync(join(runDir, "config.resolved.toml"), stringifyToml(JSON.parse(JSON.stringify(config))));
  const metrics = metricsPath(runDir);
  if (!resumed) writeFileSync(metrics, "");
  const tracker = config.log.tensorboard ? TensorBoardLog.open(runDir, log) : undefined;
  const record = (row: Record<string, number>) => {
    appendFileSync(metrics, `${JSON.stringify(row)}\n`);
    tracker?.scalars(row.step!, row);
  };

  const model = await loadModel(checkpoint?.modelDir ?? config.model.path, { dtype: config.model.dtype });
  // SIGTERM: noted now, acted on between steps (a step is one synchronous native call); removed in
  // the finally below. One during the load above ends the process as usual: nothing to save yet
  let terminated = false;
  const onTerm = () => {
    terminated = true;
  };
  process.on("SIGTERM", onTerm);
  try {
    ensureLora(model, config.model.lora, config.seed, "the sft config");
    if (t.precision === "bf16-autocast") model.setOption("autocast_bf16", true);
    const optim = t.optim;
    using optimizer = NativeOptimizer.create(model, {
      beta1: optim.betas[0],
      beta2: optim.betas[1],
      eps: optim.eps,
      weightDecay: optim.weight_decay,
    });
    if (checkpoint) optimizer.loadState(checkpoint.optimizerState());
    const learner = nativeLearner(model, optimizer);
    const batches = new SftBatches(examples, batchOptions);
    if (resumed) batches.restore(resumed.batches);
    const bandWatch = config.eval?.stop && new BandWatch(config.eval.stop);
    let lastEvalMetrics: Record<string, number> = {};
    let band: BandRecord | undefined;
    const runEval = async (step: number): Promise<EnvEval[]> => {
      if (evalEnvs.length === 0) return [];
      const started = performance.now();
      const results = await evalAll(model, renderer, config, evalEnvs);
      lastEvalMetrics = Object.assign({}, ...results.map((r) => evalMetrics(r)));
      record({ step, ...lastEvalMetrics, "time/eval": (performance.now() - started) / 1000 });
      log(
        `eval  step ${step}: ${results
          .map(
            (r) =>
              `${r.env} ${Object.entries(r.metrics)
                .filter(([k]) => /pass@1$|^avg@/.test(k))
                .map(([k, v]) => `${k} ${v.toFixed(3)}`)
                .join(" ")}`,
          )
          .join(" | ")}`,
      );
      for (const failed of results.map(failedRolloutsLine)) if (failed) warn(`eval: ${failed}`);
      return results;
    };

    const evalBefore = resumed ? resumed.evalBefore : await runEval(0);
    let evalAfter = evalBefore;
    const started = performance.now() - (resumed?.seconds ?? 0) * 1000;
    let tokens = resumed?.tokens ?? 0;
    let trainSeconds = resumed?.trainSeconds ?? 0;
    let firstNll = resumed?.firstNll ?? Number.NaN;
    let lastNll = resumed?.lastNll ?? Number.NaN;
    const width = String(totalSteps).length;
    let step = resumed?.step ?? 0;
    let savedStep = step;
    const save = () => {
      const state: SftState = {
        format: 1,
        kind: "sft",
        step,
        batches: batches.state,
        data,
        tokens,
        trainSeconds,
        seconds: (performance.now() - started) / 1000,
        firstNll,
        lastNll,
        evalBefore: evalBefore.map((e) => ({ ...e, results: [] })),
      };
      const keep = config.save.keep === 0 ? Number.POSITIVE_INFINITY : config.save.keep;
      savedStep = step;
      return writeCheckpoint(runDir, step, {
        model,
        optimizer,
        sourceDir: config.model.path,
        orchestratorState: state,
        keep,
      });
    };
    let stopped: SftSummary["stopped"];
    while (step < totalSteps && !band) {
      await Bun.sleep(0); // lets a SIGTERM's handler run
      if (terminated) {
        stopped = "SIGTERM";
        if (config.save.on_sigterm && step > savedStep) log(`SIGTERM: wrote the checkpoint of step ${step}: ${save()}`);
        else log(`SIGTERM: stopping after step ${step}`);
        break;
      }
      step++;
      const packed = batches.nextPacked();
      const lr = learningRate(step, optim.lr, t.schedule, totalSteps);
      const result = trainStep(learner, packed, {
        lr,
        maxGradNorm: optim.max_norm,
        losses: [rlLoss()],
      });
      const m = result.metrics;
      tokens += packed.tokens;
      trainSeconds += m.seconds!;
      lastNll = m.nll!;
      if (step === 1) firstNll = lastNll;
      const perEnv = Object.fromEntries(Object.entries(result.perEnv).map(([env, e]) => [`nll/${env}`, e.nll!]));
      record({
        step,
        epoch: batches.epochs,
        "loss/ce": m["loss/ce"]!,
        nll: m.nll!,
        ...(Object.keys(perEnv).length > 1 ? perEnv : {}),
        "count/ce": m["count/ce"]!,
        lr,
        grad_norm: m.grad_norm!,
        skipped: m.skipped!,
        tokens: packed.tokens,
        truncated: packed.truncatedSamples,
        "throughput/tokens_per_s": m.tokens_per_s!,
        "time/step": m.seconds!,
      });
      log(
        `step ${String(step).padStart(width)}/${totalSteps} | nll ${m.nll!.toFixed(4)} | lr ${fmtLr(lr)} | grad ${m.grad_norm!.toFixed(2)}${m.skipped ? " (skipped: not finite)" : ""} | ${packed.tokens} tok | ${Math.round(m.tokens_per_s!)} tok/s | ${m.seconds!.toFixed(2)} s | epoch ${batches.epochs.toFixed(2)}`,
      );
      if (config.eval && (step % config.eval.interval === 0 || step === totalSteps)) {
        evalAfter = await runEval(step);
        if (bandWatch?.check(step, lastEvalMetrics)) band = bandWatch.write(runDir, step);
      }
      // After the step's eval, so a checkpoint's metrics (kept on resume) include the eval of its step.
      // The last step is checkpointed too, so a finished run trains further with --resume --set trainer.steps=N.
      if (config.save.interval > 0 && (step % config.save.interval === 0 || step === totalSteps || band))
        log(`saved ${save()}`);
    }
    const seconds = (performance.now() - started) / 1000;
    const modelDir = join(runDir, "model");
    const totals = {
      steps: step,
      seconds,
      trainSeconds,
      tokens,
      examples: examples.length,
      epochs: batches.epochs,
      truncatedExamples,
      firstNll,
      lastNll,
      modelDir,
      outputDir: runDir,
      evalBefore,
      evalAfter,
    };
    if (stopped) return { ...totals, stopped };
    // with [model.lora]: the adapter in PEFT's layout, and merged/ full weights when asked for
    const merged = model.lora && config.model.lora?.merged;
    saveModel(model, modelDir, {
      dtype: config.save.dtype,
      sourceDir: config.model.path,
      writeExtra: merged
        ? (dir) =>
            saveModel(model, join(dir, "merged"), { dtype: config.save.dtype, sourceDir: config.model.path, merged })
        : undefined,
    });
    if (bandWatch && !band) throw bandWatch.shortOfBand(step);
    if (band)
      log(`stopped at step ${step}: ${band.metric} ${band.value.toFixed(3)} is in the band (${runDir}/band.json)`);
    return { ...totals, band };
  } finally {
    process.off("SIGTERM", onTerm);
    model.free();
  }
}
