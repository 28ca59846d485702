// `rlx serve`: an OpenAI-compatible server (vLLM's subset) over the shim, batched. Loads the model
// directory, starts the engine (src/engine/engine.ts) and the HTTP layer
// (src/serve/server.ts), prints one line with the URL once it is listening, and on SIGTERM or
// SIGINT refuses new work, finishes what is in flight and exits 0. `--api-key` (or $RLX_API_KEY)
// guards every route but /health; a policy server loads weights only under `--weights-root`.
//
// Logprobs it returns are the trainer's: log_softmax(logits / temperature) of each sampled token
// (vLLM reports temperature-1 logprobs by default), so a policy server's logprobs can be used for
// importance ratios as they are.
import { defineCommand } from "citty";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { ConfigError, ModelFileError } from "../errors.ts";
import { API_KEY_ENV, isLoopback } from "../serve/auth.ts";

function intFlag(name: string, value: string, min: number): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new ConfigError(`--${name} ${value}: expected an integer >= ${min}`);
  return n;
}

/**
 * A policy server loads whatever directory /update_weights names, so it needs a root to confine
 * that to, and off this machine's loopback a key to keep strangers from calling it at all.
 */
function checkPolicyAccess(host: string, apiKey: string | undefined, weightsRoot: string | undefined): void {
  if (weightsRoot === undefined)
    throw new ConfigError("--policy needs --weights-root DIR: the only directory /update_weights may load from", {
      fix: "pass the run's weights directory, e.g. --weights-root outputs/run/weights",
    });
  if (apiKey === undefined && !isLoopback(host))
    throw new ConfigError(
      `--policy on --host ${host} needs an API key: anyone who can reach the port could load weights`,
      {
        fix: `pass --api-key KEY or set $${API_KEY_ENV} (clients send Authorization: Bearer KEY), or bind --host 127.0.0.1`,
      },
    );
}

export default defineCommand({
  meta: {
    name: "serve",
    description: "Serve a model over an OpenAI-compatible HTTP API (completions, chat, prompt logprobs)",
  },
  args: {
    model: {
      type: "string",
      required: true,
      description:
        "Model directory (HF layout), or a LoRA adapter directory (PEFT layout: its base model plus the adapter, unmerged)",
    },
    host: { type: "string", default: "127.0.0.1", description: "Address to bind" },
    port: { type: "string", default: "8000", description: "Port (0: any free port)" },
    "max-batch": { type: "string", default: "64", description: "Sequences decoded together" },
    "max-model-len": {
      type: "string",
      description: "Prompt + completion tokens per sequence (default: min(max_position_embeddings, 2048))",
    },
    "kv-tokens": {
      type: "string",
      description:
        "K/V cache budget in tokens, shared by the running sequences in blocks of 16 (default: room for max-batch sequences of max-model-len; at least max-model-len); a request waits until its prompt + max_tokens fit (GET /metrics)",
    },
    "max-queue": {
      type: "string",
      description: "Requests waiting for a slot before answering 429 (default 16 x max-batch)",
    },
    "max-logprobs": {
      type: "string",
      default: "20",
      description: "Most alternatives per token a request may ask for (logprobs, top_logprobs, prompt_logprobs)",
    },
    "served-model-name": { type: "string", description: "The model name clients send (default: --model as given)" },
    dtype: { type: "string", default: "f32", description: "Weights in memory: f32 or bf16" },
    device: { type: "string", default: "cpu", description: "Where the model runs: cpu or cuda[:N]" },
    policy: {
      type: "boolean",
      description: "Accept POST /update_weights (the live policy of a training run); needs --weights-root",
    },
    "weights-root": {
      type: "string",
      description: "With --policy: /update_weights loads only directories under this one (the run's weights/)",
    },
    "api-key": {
      type: "string",
      description: `Require Authorization: Bearer KEY on every route but /health (default: $${API_KEY_ENV}); required with --policy on a non-loopback --host`,
    },
    "policy-version": { type: "string", default: "0", description: "The version the initial weights report" },
    "prefix-caching": {
      type: "boolean",
      default: true,
      description:
        "A prompt continues the K/V a slot kept from an earlier request (a conversation's next turn); --no-prefix-caching makes every prefill a full one",
    },
    schedule: {
      type: "string",
      description:
        "Record every generator call to this file, for replay (rlx train's policy servers: RUN/schedule/; docs/run-directory.md)",
    },
    "reload-mode": {
      type: "string",
      default: "drain",
      description:
        "POST /update_weights: drain (running requests finish on the old weights first) or in-flight (swap between decode steps; running requests continue on the new weights)",
    },
  },
  async run({ args }) {
    if (!existsSync(join(args.model, "config.json")) && !existsSync(join(args.model, "adapter_config.json"))) {
      throw new ModelFileError(
        `--model ${args.model}: no config.json there (not a model directory) and no adapter_config.json (not a LoRA adapter)`,
        { fix: "pass a Hugging Face model directory, e.g. one written by `rlx init --preset tiny --out DIR`" },
      );
    }
    if (args.dtype !== "f32" && args.dtype !== "bf16")
      throw new ConfigError(`--dtype ${args.dtype}: expected f32 or bf16`);
    if (!/^(cpu|cuda(:\d+)?)$/.test(args.device))
      throw new ConfigError(`--device ${args.device}: expected cpu or cuda[:N]`);
    const port = intFlag("port", args.port, 0);
    const maxBatch = intFlag("max-batch", args["max-batch"], 1);
    const maxModelLen =
      args["max-model-len"] === undefined ? undefined : intFlag("max-model-len", args["max-model-len"], 2);
    const kvTokens = args["kv-tokens"] === undefined ? undefined : intFlag("kv-tokens", args["kv-tokens"], 2);
    const maxQueue = args["max-queue"] === undefined ? undefined : intFlag("max-queue", args["max-queue"], 1);
    const maxLogprobs = intFlag("max-logprobs", args["max-logprobs"], 0);
    const version = intFlag("policy-version", args["policy-version"], 0);
    const reloadMode = args["reload-mode"];
    if (reloadMode !== "drain" && reloadMode !== "in-flight")
      throw new ConfigError(`--reload-mode ${reloadMode}: expected drain or in-flight`);
    const apiKey = args["api-key"] ?? (process.env[API_KEY_ENV] || undefined);
    const weightsRoot = args["weights-root"];
    if (args.policy) checkPolicyAccess(args.host, apiKey, weightsRoot);
    const [{ loadModel }, { Tokenizer }, { Engine }, { startServer }, { exitWithParent }, { CoreShare }] =
      await Promise.all([
        import("../model/hf.ts"),
        import("../model/tokenizer.ts"),
        import("../engine/engine.ts"),
        import("../serve/server.ts"),
        import("../processes/children.ts"),
        import("../native/core_share.ts"),
      ]);
    exitWithParent(); // a policy server of `rlx train` must not outlive a SIGKILLed orchestrator
    const tokenizer = Tokenizer.load(args.model);
    const model = await loadModel(args.model, { dtype: args.dtype, device: args.device });
    const engine = new Engine(model, {
      maxBatch,
      maxLogprobs,
      version,
      reloadMode,
      prefixCaching: args["prefix-caching"],
      coreShare: CoreShare.fromEnv("generator"), // rlx train's policy server: the cores shared with its trainer
      ...(maxModelLen === undefined ? {} : { maxModelLen }),
      ...(kvTokens === undefined ? {} : { kvTokens }),
      ...(maxQueue === undefined ? {} : { maxQueue }),
      ...(args.schedule === undefined ? {} : { schedule: { path: args.schedule, model: resolve(args.model) } }),
    });
    const modelName = args["served-model-name"] ?? args.model;
    const server = startServer({
      engine,
      tokenizer,
      modelName,
      host: args.host,
      port,
      policy: args.policy,
      ...(apiKey === undefined ? {} : { apiKey }),
      ...(weightsRoot === undefined ? {} : { weightsRoot: resolve(weightsRoot) }),
      onInternalError: (err) => console.error("rlx serve: internal error:", err),
    });
    console.log(
      `rlx serve: ${modelName} on ${server.url}/v1 (max batch ${maxBatch}, max model len ${engine.maxModelLen}, K/V ${engine.kvTokens} tokens${args.policy ? `, policy, ${reloadMode} reloads` : ""}${apiKey ? ", API key required" : ""})`,
    );
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      console.log(
        `rlx serve: ${signal}: draining ${engine.load.running} running and ${engine.load.queued} queued requests`,
      );
      await server.drain();
      console.log("rlx serve: stopped");
      process.exit(0);
    };
    process.on("SIGTERM", () => void stop("SIGTERM"));
    process.on("SIGINT", () => void stop("SIGINT"));
    await new Promise(() => {});
  },
});
