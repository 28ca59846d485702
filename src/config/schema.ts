// The run config: every key, its type and its default. Config files hold deltas over these
// defaults (configs/*.toml). Strict objects everywhere: an unknown key is an error, never ignored.
// Algorithm and sampler blocks are parsed and checked per type by their registries
// (src/algorithms/registry.ts, src/task_samplers/registry.ts), and env args by each
// environment's own schema, so both errors name the path the user typed.
import { z } from "zod";
import { modelReferenceSchema } from "../algorithms/schemas.ts";
import { judgeSchema } from "../judges/schema.ts";
import { remoteBlock } from "../envs/remote/index.ts";
import { lossSchema } from "../algorithms/loss_schema.ts";
import { LORA_TARGETS } from "../model/config.ts";

const algoBlock = z.looseObject({ type: z.string() });
const samplerBlock = z.looseObject({ type: z.string() });
const positiveInt = z.number().int().positive();

/** One role of a multi-agent env (docs/algorithms.md, "Roles"). */
const roleEntry = z.strictObject({
  /** Who plays it: the live policy, or a frozen endpoint (never trained). */
  source: modelReferenceSchema.default("policy"),
  /** Whether its tokens train; default: true for the policy, false for a frozen endpoint. */
  train: z.boolean().optional(),
  /** Its algorithm; absent = the env's. */
  algo: algoBlock.optional(),
});

/**
 * `[model.lora]`: train low-rank adapters beside frozen base weights instead of every weight
 * (docs/lora.md). Published steps and checkpoints then hold the adapter in PEFT's layout.
 */
export const loraSchema = z.strictObject({
  rank: positiveInt.default(16),
  /** The adapter's output is scaled by alpha / rank (PEFT's lora_alpha). */
  alpha: z.number().positive().default(32),
  /** Dropout on the adapters' input, in train steps only. */
  dropout: z.number().min(0).lt(1).default(0),
  /** Which projections of every layer get an adapter (PEFT's module names). */
  targets: z
    .array(z.enum(LORA_TARGETS))
    .min(1)
    .refine((t) => new Set(t).size === t.length, "a target is listed twice")
    .default([...LORA_TARGETS]),
  /** Also write full weights with the adapter merged in, as `merged/` inside each published step and checkpoint. */
  merged: z.boolean().default(false),
});

const envEntry = z.strictObject({
  /** Built-in env id (math, forth, search), a path to a custom env's .ts file, or an env server's URL. */
  id: z.string().min(1),
  /** When `id` is an env server's URL: its key, timeouts, concurrency and shape (docs/environments.md). */
  remote: remoteBlock,
  /** Name in metrics and logs; defaults to id. Must be unique across train envs. */
  name: z.string().min(1).optional(),
  /** Relative share of rollouts drawn from this env; 0: drawn only when another env's trace spawns a
   * group of it (a proposer's solvers, src/envs/proposer/spawned.ts). */
  ratio: z.number().min(0).default(1),
  /** A schedule over steps: the share moves linearly from `ratio` at step 1 to this at ratio_steps (flat after). */
  ratio_end: z.number().positive().optional(),
  /** Steps over which ratio moves to ratio_end; absent = max_steps. */
  ratio_steps: positiveInt.optional(),
  /** Rollouts per task; defaults to orchestrator.group_size. */
  group_size: positiveInt.optional(),
  /** Sampling temperature; defaults to orchestrator.temperature. */
  temperature: z.number().min(0).max(2).optional(),
  /** Max new tokens per model turn; defaults to orchestrator.max_tokens. */
  max_tokens: positiveInt.optional(),
  /**
   * A multi-turn episode whose next prompt leaves no room under orchestrator.seq_len: "error" (the
   * rollout fails naming the limit) or "truncate" (the episode ends there, stop reason "context",
   * and is scored and trained as it stands). A first prompt past the limit is always an error.
   */
  context_limit: z.enum(["error", "truncate"]).default("error"),
  /** Env-specific arguments, validated by the env's own schema. */
  args: z.record(z.string(), z.unknown()).default({}),
  /** This env's algorithm; absent = a deep copy of [orchestrator.algo]. */
  algo: algoBlock.optional(),
  /** This env's sampler (docs/task_samplers.md); absent = a deep copy of [orchestrator.sampler]. */
  sampler: samplerBlock.optional(),
  /** A judge whose score replaces the env's reward (docs/algorithms.md, "Judges"); the exact reward stays a metric. */
  judge: judgeSchema.optional(),
  /** A multi-agent env's roles by name: who plays each, whether it trains, with which algorithm. */
  roles: z.record(z.string(), roleEntry).default({}),
  /** Limits on the env's reward calls (a judge, or a custom env's reward that calls out). */
  reward: z
    .strictObject({
      /** Reward calls running at once; the others wait (the wait does not count against the timeout). */
      concurrency: positiveInt.default(16),
      /** Per reward call; past it the rollout fails with the reason (never scored 0). */
      timeout_s: z.number().positive().default(300),
    })
    .prefault({}),
});

/** Eval scores with the env's exact reward: no judge, no reward limits. */
const evalEntry = envEntry.omit({
  algo: true,
  ratio: true,
  ratio_end: true,
  ratio_steps: true,
  sampler: true,
  judge: true,
  reward: true,
  roles: true,
});

export const configSchema = z.strictObject({
  /** Run directory: metrics, rollouts, weights, checkpoints, logs. */
  output_dir: z.string().min(1).default("outputs/run"),
  max_steps: positiveInt.default(100),
  seed: z.number().int().min(0).default(0),
  /**
   * Bit-identical reruns: the same config gives the same weights and the same non-timing metrics.
   * Needs orchestrator.max_async_level = 0 and a CPU trainer (any world size); runs each trainer
   * rank on trainer.threads threads (0: one) and the policy in this process on one thread
   * (docs/run-directory.md, "Deterministic runs"). Any run is replayable instead (`rlx replay`).
   */
  deterministic: z.boolean().default(false),

  model: z.strictObject({
    /** Hugging Face layout directory (config.json, model.safetensors, tokenizer.json). */
    path: z.string().min(1),
    /** Weights as published and as the policy holds them (the trainer keeps float32 masters). */
    dtype: z.enum(["f32", "bf16"]).default("f32"),
    /** LoRA adapters instead of full fine-tuning (absent: every weight trains). */
    lora: loraSchema.optional(),
  }),

  trainer: z
    .strictObject({
      device: z
        .string()
        .regex(/^(cpu|cuda(:\d+)?)$/, 'expected "cpu" or "cuda[:N]"')
        .default("cpu"),
      /** bf16 autocast over float32 master weights. */
      precision: z.enum(["f32", "bf16-autocast"]).default("f32"),
      /** Intra-op threads; 0 = one per core. */
      threads: z.number().int().min(0).default(0),
      /** With one trainer and one policy process on this machine's CPU: whichever is busy alone
       * takes all the cores, and both busy split them (src/native/core_share.ts). */
      share_cores: z.boolean().default(true),
      /** Data-parallel trainer ranks (c10d); `rlx train --nproc N` sets it. docs/scaling.md. */
      world_size: positiveInt.default(1),
      /** What the ranks split (docs/scaling.md, "Sharded training"): "none", every rank a whole
       * replica; "optimizer" (ZeRO-1), the AdamW state and float32 masters; "full" (ZeRO-3),
       * weights, gradients and AdamW state, each layer gathered while it computes. */
      shard: z.enum(["none", "optimizer", "full"]).default("none"),
      /** Ranks each packed row is split over along the sequence (docs/scaling.md, "Long
       * context"): world_size / context_parallel replicas train different rows, the ranks of
       * one replica the same rows, each holding the activations of 1 / context_parallel of it. */
      context_parallel: positiveInt.default(1),
      /** Keep each layer's input and recompute the layer in the backward: less activation memory
       * for about a third more compute. Always on with shard = "full". */
      activation_checkpointing: z.boolean().default(false),
      /** How the ranks meet (only read when world_size > 1). */
      dist: z
        .strictObject({
          /** "auto": NCCL on a cuda device, Gloo on cpu. */
          backend: z.enum(["auto", "gloo", "nccl"]).default("auto"),
          /** "tcp": rank 0 serves a TCPStore at master_addr:master_port; "file": a fresh store file in the run directory (one machine, or a shared filesystem). */
          store: z.enum(["tcp", "file"]).default("tcp"),
          master_addr: z.string().min(1).default("127.0.0.1"),
          /** 0 = a free port picked at launch (one machine only). */
          master_port: z.number().int().min(0).max(65535).default(0),
          /** Bounds the rendezvous and every collective: a dead or stuck rank fails the others after this. */
          timeout_s: z.number().positive().default(600),
          /** Ranks `rlx train` starts on this machine; empty = all. Others are started by hand on other nodes (docs/scaling.md). */
          local_ranks: z.array(z.number().int().min(0)).default([]),
          /** Who starts the ranks: "rlx", `rlx train` (local_ranks); "external", a launcher starts
           * every rank (srun, torchrun: `rlx trainer` reads its variables) and `rlx train` none
           * (docs/scaling.md, "Launching on several nodes"; `rlx launch slurm` sets it). */
          launcher: z.enum(["rlx", "external"]).default("rlx"),
        })
        .prefault({}),
      optim: z
        .strictObject({
          lr: z.number().positive().default(1e-6),
          betas: z.tuple([z.number().min(0).lt(1), z.number().min(0).lt(1)]).default([0.9, 0.999]),
          eps: z.number().positive().default(1e-8),
          weight_decay: z.number().min(0).default(0.01),
          /** Global grad-norm clip; 0 disables. */
          max_norm: z.number().min(0).default(1.0),
        })
        .prefault({}),
      schedule: z
        .strictObject({
          type: z.enum(["constant", "linear", "cosine"]).default("constant"),
          warmup_steps: z.number().int().min(0).default(0),
          min_lr: z.number().min(0).default(0),
          /** Steps over which the rate decays to min_lr (then stays there); absent = the run's steps. */
          decay_steps: z.number().int().positive().optional(),
        })
        .prefault({}),
      /** The rl component's loss: its type (default DPPO + KL, as prime-rl's trainer/rl/loss.py),
       * its reduction and their settings (docs/architecture.md §6); an env's algo block may name
       * its own (`loss`, src/algorithms/loss_schema.ts). */
      loss: lossSchema.prefault({}),
    })
    .prefault({}),

  orchestrator: z.strictObject({
    /** Rollouts per training step. */
    batch_size: positiveInt.default(64),
    /** Rollouts per task (the group of group-relative algorithms). */
    group_size: positiveInt.default(8),
    /** Packed micro-batch row length in tokens; longer samples are truncated. */
    seq_len: positiveInt.default(2048),
    /** Pack the weightless prefix samples share (a group's prompt) once per row (docs/architecture.md §4). */
    share_prefixes: z.boolean().default(true),
    /** Steps the orchestrator may run ahead of the trainer's published weights. */
    max_async_level: z.number().int().min(0).default(1),
    /** Rollouts sampled by weights older than this many versions are dropped. */
    max_off_policy_steps: z.number().int().min(0).default(8),
    temperature: z.number().min(0).max(2).default(1.0),
    max_tokens: positiveInt.default(256),
    /** Abort when more than this fraction of the rollouts of the last 5 batches failed (1 = never). */
    max_failure_rate: z.number().min(0).max(1).default(0.5),
    /** Remove rl membership of zero-advantage tokens before packing. */
    filter_zero_advantages: z.boolean().default(true),
    /** Batches in a row with nothing to train (every advantage 0, or every rollout failed), or of
     * rollouts dropped as stale, before the run stops; raise it for a model that solves most tasks. */
    max_empty_batches: positiveInt.default(10),
    /** Extra chat-template variables for every rollout and eval, e.g. { enable_thinking = false } (Qwen3). */
    chat_template_kwargs: z.record(z.string(), z.unknown()).default({}),
    algo: algoBlock.default({ type: "grpo" }),
    /** Which tasks each env draws, which finished groups a batch admits, what is replayed (docs/task_samplers.md). */
    sampler: samplerBlock.default({ type: "uniform" }),
    train: z.strictObject({ env: z.array(envEntry).min(1, "at least one [[orchestrator.train.env]] is needed") }),
    eval: z
      .strictObject({
        env: z.array(evalEntry).min(1),
        /** Evaluate every N steps (and at the end). */
        interval: positiveInt.default(10),
        /** Held-out tasks per env; -1 = all. */
        num_examples: z.number().int().min(-1).default(64),
        /** Samples per task for pass@k / avg@k. */
        k: positiveInt.default(8),
        /** Also one temperature-0 sample per task: eval/<env>/greedy/pass@1. */
        greedy: z.boolean().default(false),
      })
      .optional(),
  }),

  inference: z
    .strictObject({
      /** External policy servers, each ending in /v1; empty = spawn `rlx serve --policy`. */
      base_urls: z.array(z.url({ protocol: /^https?$/ })).default([]),
      /**
       * What serves the live policy at base_urls, which decides how a published step reaches it
       * (src/clients/policy_engines.ts, docs/engines.md): `rlx serve` (POST /update_weights), vLLM
       * (its dev-mode routes) or SGLang (/update_weights_from_disk). Spawned servers are rlx's.
       */
      engine: z.enum(["rlx", "vllm", "sglang"]).default("rlx"),
      /** Environment variable holding base_urls' API key (spawned servers get a fresh one per run). */
      api_key_var: z.string().min(1).optional(),
      /** Policy servers to spawn when base_urls is empty. */
      servers: positiveInt.default(1),
      host: z.string().default("127.0.0.1"),
      port: z.number().int().min(1).max(65535).default(8000),
      max_batch: positiveInt.default(64),
      /**
       * K/V cache tokens of each spawned or in-process policy, shared by its running sequences in
       * blocks (docs/serve.md `--kv-tokens`); absent = room for max_batch sequences of seq_len. At
       * long seq_len set it to what the running rollouts need together: requests beyond it wait.
       */
      kv_tokens: positiveInt.optional(),
      /** Where spawned and in-process policies run: "auto" = trainer.device; their weights are model.dtype. */
      device: z
        .string()
        .regex(/^(auto|cpu|cuda(:\d+)?)$/, 'expected "auto", "cpu" or "cuda[:N]"')
        .default("auto"),
      /**
       * How a published step reaches the policy: "in-flight" swaps weights between decode steps
       * (running rollouts continue on the new weights, PipelineRL); "drain" lets them finish on
       * the old weights first. Spawned servers and the in-process policy only; external ones
       * decide for themselves.
       */
      reload: z.enum(["in-flight", "drain"]).default("in-flight"),
      /**
       * A prompt continues the K/V a slot kept from an earlier one (a tool episode's next turn;
       * docs/serve.md). Spawned servers and the in-process policy; a deterministic run turns it off.
       */
      prefix_caching: z.boolean().default(true),
      /**
       * Record every call the policy's engine makes on its generator in RUN/schedule/ (what timing
       * decided: batches, decode steps, weight swaps, threads), for `rlx replay --rollouts`.
       * Spawned servers and the in-process policy.
       */
      record_schedule: z.boolean().default(true),
      /**
       * How each step's weights reach the policy (docs/engines.md, "Weights in memory"): "disk"
       * publishes weights/step_N/ and every server loads it; "c10d" sends them from the trainer's
       * rank 0 over one c10d channel per server (Gloo on CPU, NCCL on GPU), and weights/step_N/
       * holds only the step's marker except every publish_every steps, at checkpoints, at hub
       * pushes and at the last step. rlx policies (spawned, in-process, or rlx serve at base_urls).
       */
      weight_transfer: z.enum(["disk", "c10d"]).default("disk"),
      /** With weight_transfer = "c10d": also write weights/step_N/ every N steps (0 = never besides the above). */
      publish_every: z.number().int().min(0).default(0),
      /** With "c10d": seconds a channel's join and each transfer may take before the server is named as failed. */
      transfer_timeout_s: z.number().positive().default(600),
      /**
       * With "c10d": "tensors" sends only the tensors whose bytes changed since each server's last
       * transfer (the server checks the rest against their sums); "none" sends every tensor.
       */
      transfer_delta: z.enum(["none", "tensors"]).default("none"),
      /**
       * A policy server that dies or fails a weight update: "stop" ends the run (--resume, or
       * ckpt.max_restarts, continues it); "continue" goes on with the others (rlx servers), the
       * trainer dropping its weight channel and the rollouts going to the rest, until none is left.
       */
      lost_server: z.enum(["stop", "continue"]).default("stop"),
    })
    .prefault({}),

  ckpt: z
    .strictObject({
      /** Checkpoint every N steps; 0 = only at the end. */
      interval: z.number().int().min(0).default(0),
      /** Checkpoints kept on disk. */
      keep: positiveInt.default(2),
      /**
       * On SIGTERM (a scheduler's pre-emption) the trainer checkpoints the last finished step
       * before it exits, so a resumed run loses at most the step in flight.
       */
      on_sigterm: z.boolean().default(true),
      /**
       * When a child of `rlx train` dies (a trainer rank, a policy server), stop everything and
       * resume the whole run from its newest whole checkpoint, up to this many times
       * (`--max-restarts N` overrides); 0 = the run stops with the error.
       */
      max_restarts: z.number().int().min(0).default(0),
      /** Seconds before the first restart; each further one waits twice as long, at most 300 s. */
      restart_backoff_s: z.number().min(0).default(5),
      /**
       * Keep every step file (batches/step_N.bin) and every published weights/step_N, which the
       * trainer otherwise deletes once used: what `rlx replay --gradient` recomputes a step from and
       * compares it with (docs/run-directory.md, "Replaying a step"). Costs a step file and a copy of
       * the weights a step.
       */
      keep_steps: z.boolean().default(false),
    })
    .prefault({}),

  hub: z
    .strictObject({
      /** A Hugging Face Hub repo, namespace/name, that published steps are pushed to; absent = never. */
      repo: z
        .string()
        .regex(/^[\w.-]+\/[\w.-]+$/, "namespace/name")
        .optional(),
      /** Push weights/step_N every N steps, and the last step. */
      interval: positiveInt.default(100),
      /** The environment variable holding a write token. */
      token_var: z.string().min(1).default("HF_TOKEN"),
      /** The Hub endpoint; default $HF_ENDPOINT, else https://huggingface.co. */
      url: z.url({ protocol: /^https?$/ }).optional(),
      /** Create the repo private (an existing repo keeps its visibility). */
      private: z.boolean().default(false),
    })
    .prefault({}),

  log: z
    .strictObject({
      /** Write the audit records rollouts/step_N.jsonl every N steps; 0 = never. */
      rollouts_interval: z.number().int().min(0).default(1),
      /** Write TensorBoard event files to tensorboard/ (every metric, a few rollouts as text). */
      tensorboard: z.boolean().default(true),
    })
    .prefault({}),
});

export type RawConfig = z.infer<typeof configSchema>;
export type EnvEntry = z.infer<typeof envEntry>;
export type EvalEntry = z.infer<typeof evalEntry>;
