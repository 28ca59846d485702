// The `rlx sft` config: every key, its type and its default. Like the run config (schema.ts), a
// TOML file holds deltas, `--set a.b=c` overrides it, and an unknown key or a wrong type is an
// error naming the file and key path. The optimizer and schedule blocks are the run config's own
// (same keys, same meaning), with an SFT-sized learning-rate default.
//
//   chat_template_kwargs  template switches for the data and the evals (as the RL run's)
//   [model]    path        the model to start from (HF layout); [model.lora] adapters instead of every weight
//   [data]     path, repeat  JSONL file(s): chat messages or prompt/completion rows; per-file repeat counts
//   [trainer]  steps | epochs, batch_tokens (per optimizer step), seq_len (per packed row), optim, schedule
//   [eval]     env list, interval, num_examples, k, greedy: held-out tasks between steps;
//              [eval.stop] metric, min, max, min_step: stop at the first eval inside the band (band.ts)
//   [save]     interval, keep, dtype, on_sigterm  resumable checkpoints (`rlx sft --resume`); the final model always goes to <output_dir>/model
import { z } from "zod";
import { ConfigError, configError } from "../errors.ts";
import { checkEnvArgs, isEnvPath, isEnvUrl, remoteBlock } from "../envs/index.ts";
import { customEnvDefinition } from "../config/custom_envs.ts";
import { readToml } from "../config/load.ts";
import { applyOverrides } from "../config/overrides.ts";
import { configSchema, loraSchema } from "../config/schema.ts";

const positiveInt = z.number().int().positive();
const runTrainer = configSchema.shape.trainer.unwrap().shape;

const evalEnv = z.strictObject({
  /** Built-in env id, a custom env's .ts path or an env server's URL. */
  id: z.string().min(1),
  /** Name in metrics; defaults to the env's own id (a custom env's file or server names it). */
  name: z.string().min(1).optional(),
  /** When `id` is an env server's URL: its settings (docs/environments.md). */
  remote: remoteBlock,
  args: z.record(z.string(), z.unknown()).default({}),
  /** Overrides of the [eval] settings for this env. */
  k: positiveInt.optional(),
  temperature: z.number().min(0).max(2).optional(),
  max_tokens: positiveInt.optional(),
});

export const sftConfigSchema = z.strictObject({
  /** Run directory: config.resolved.toml, metrics.jsonl, checkpoints/, and the final model/. */
  output_dir: z.string().min(1).default("outputs/sft"),
  seed: z.number().int().min(0).default(0),
  /** Template switches for every rendering of the data and the evals, e.g. { enable_thinking = false }: the RL run's orchestrator.chat_template_kwargs. */
  chat_template_kwargs: z.record(z.string(), z.unknown()).default({}),

  model: z.strictObject({
    path: z.string().min(1),
    dtype: z.enum(["f32", "bf16"]).default("f32"),
    /** LoRA adapters instead of full fine-tuning (the run config's [model.lora]; docs/lora.md). */
    lora: loraSchema.optional(),
  }),

  data: z.strictObject({
    /** One JSONL file or a list; rows of several files are mixed. */
    path: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    /** Times each file's rows appear per epoch, one count per file (default 1 each): mixing weights. */
    repeat: z.array(positiveInt).optional(),
    shuffle: z.boolean().default(true),
  }),

  trainer: z
    .strictObject({
      /** Optimizer steps; absent = as many as `epochs` passes over the data take. */
      steps: positiveInt.optional(),
      epochs: z.number().positive().default(1),
      /** Tokens per optimizer step (samples are added until the next would exceed it). */
      batch_tokens: positiveInt.default(8192),
      /** Packed row length; longer samples are truncated (and counted). */
      seq_len: positiveInt.default(2048),
      threads: runTrainer.threads,
      precision: runTrainer.precision,
      optim: runTrainer.optim
        .unwrap()
        .extend({ lr: z.number().positive().default(1e-5) })
        .prefault({}),
      schedule: runTrainer.schedule,
    })
    .prefault({}),

  eval: z
    .strictObject({
      env: z.array(evalEnv).min(1),
      /** Evaluate every N steps, before the first step and after the last. */
      interval: positiveInt.default(50),
      /** Held-out tasks per env; -1 = all. */
      num_examples: z.number().int().min(-1).default(64),
      /** Samples per task at `temperature` (avg@k, pass@k). */
      k: positiveInt.default(1),
      temperature: z.number().min(0).max(2).default(1.0),
      /** Also one temperature-0 sample per task (greedy/pass@1). */
      greedy: z.boolean().default(true),
      max_tokens: positiveInt.default(128),
      /** Prompt + completion tokens an eval sequence may hold (default: the engine's, min(max_position_embeddings,
       * 2048)); the eval's K/V budget is 32 sequences of it. */
      max_model_len: positiveInt.optional(),
      /** Stop the run at the first eval whose `metric` is in [min, max] (band.ts); absent = train every step. */
      stop: z
        .strictObject({
          /** A key the eval records, e.g. eval/math/greedy/pass@1. */
          metric: z.string().regex(/^eval\/[^/]+\/.+/, "an eval metric key, eval/<env name>/<metric>"),
          min: z.number(),
          /** Absent = no upper bound. */
          max: z.number().optional(),
          /** Evals before this step neither stop the run nor fail it: a fine-tune that must train a while first. */
          min_step: z.number().int().min(0).default(0),
        })
        .optional(),
    })
    .optional(),

  save: z
    .strictObject({
      /** Write a resumable <output_dir>/checkpoints/step_N every N steps; 0 = only the final model. */
      interval: z.number().int().min(0).default(0),
      /** Checkpoints kept (the newest); 0 = all. */
      keep: z.number().int().min(0).default(0),
      /** The final model's weights dtype on disk (checkpoints are always f32, to resume exactly). */
      dtype: z.enum(["f32", "bf16"]).default("f32"),
      /** On SIGTERM (a scheduler's pre-emption) checkpoint the last finished step before exiting (`rlx train`'s ckpt.on_sigterm). */
      on_sigterm: z.boolean().default(true),
    })
    .prefault({}),

  log: z
    .strictObject({
      /** Write TensorBoard event files to <output_dir>/tensorboard/ (every metrics.jsonl key). */
      tensorboard: z.boolean().default(true),
    })
    .prefault({}),
});

export type SftConfig = z.infer<typeof sftConfigSchema>;
export type SftEvalEnv = z.infer<typeof evalEnv>;

/** Validates each eval env's args now, so a typo fails before training, naming its key path. */
function checkEvalEnvs(config: SftConfig, source: string): void {
  config.eval?.env.forEach((env, i) => (env.args = checkEnvArgs(env, source, ["eval", "env", i])));
}

/** The stop band's metric must belong to an eval env, and its band must not be empty. Until a custom
 * env is loaded its name is unknown (its file or server gives it): `named` says whether they were. */
function checkStopBand(config: SftConfig, source: string, named = false): void {
  const stop = config.eval?.stop;
  if (!stop) return;
  const unnamed = config.eval!.env.some((e) => !e.name && (isEnvPath(e.id) || isEnvUrl(e.id)));
  const names = config.eval!.env.map((e) => e.name ?? e.id);
  const env = stop.metric.split("/")[1]!;
  if (!names.includes(env) && (named || !unnamed)) {
    throw new ConfigError(`${source}: eval.stop.metric ${stop.metric} names env ${env}, which is not an eval env`, {
      fix: `use eval/<name>/..., where <name> is one of ${names.join(", ")}`,
    });
  }
  if (stop.max !== undefined && stop.min > stop.max) {
    throw new ConfigError(`${source}: eval.stop has min ${stop.min} > max ${stop.max}`, { fix: "min <= max" });
  }
}

/** Loads an sft config: schema defaults < TOML file < `--set` overrides. */
export function loadSftConfig(path: string, overrides: readonly string[] = []): SftConfig {
  const raw = readToml(path);
  applyOverrides(raw, overrides);
  const source = overrides.length ? `${path} (with --set)` : path;
  const parsed = sftConfigSchema.safeParse(raw);
  if (!parsed.success) {
    throw configError(parsed.error.issues, source, [], { schema: sftConfigSchema });
  }
  checkEvalEnvs(parsed.data, source);
  checkStopBand(parsed.data, source);
  const { path: files, repeat } = parsed.data.data;
  const fileCount = typeof files === "string" ? 1 : files.length;
  if (repeat && repeat.length !== fileCount) {
    throw new ConfigError(`${source}: data.repeat has ${repeat.length} counts for ${fileCount} data file(s)`, {
      fix: "give one count per entry of data.path, in the same order",
    });
  }
  return parsed.data;
}

/** An sft config (loadSftConfig) whose custom eval envs are loaded: each checked against its file's
 * args schema and, without a `name`, named by its file's or server's id, as `rlx train` names them;
 * then the stop band's metric is checked against those names. */
export async function loadSftRun(path: string, overrides: readonly string[] = []): Promise<SftConfig> {
  const config = loadSftConfig(path, overrides);
  const source = overrides.length ? `${path} (with --set)` : path;
  for (const [i, env] of (config.eval?.env ?? []).entries()) {
    const definition = await customEnvDefinition(env, source, ["eval", "env", i]);
    if (definition && !env.name) env.name = definition.id;
  }
  checkStopBand(config, source, true);
  return config;
}

/** The data files as a list, each repeated `data.repeat` times. */
export function dataPaths(config: SftConfig): string[] {
  const paths = typeof config.data.path === "string" ? [config.data.path] : config.data.path;
  return paths.flatMap((path, i) => new Array<string>(config.data.repeat?.[i] ?? 1).fill(path));
}
