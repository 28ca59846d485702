// `rlx eval`: avg@k / pass@k of a model directory (in-process, over the batching engine) or of any
// OpenAI-compatible endpoint (`rlx serve`, vLLM) on environments' held-out tasks. Prompts are
// rendered here with the model's own tokenizer and chat template and sent as token ids, exactly
// as training rollouts are, so an endpoint needs a local copy of its tokenizer (--tokenizer, or
// --model). Prints a table; --json prints everything (per-task rewards too); --out writes it.
import { writeFileSync } from "node:fs";
import { defineCommand } from "citty";
import { ConfigError, EndpointError } from "../errors.ts";
import type { SamplingClient } from "../clients/types.ts";
import type { EnvEval } from "../eval/evaluate.ts";

function number(
  value: string | undefined,
  flag: string,
  fallback: number,
  check: (n: number) => boolean,
  expected: string,
): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || !check(n)) throw new ConfigError(`--${flag} ${value}: expected ${expected}`);
  return n;
}

const isCount = (n: number) => Number.isInteger(n) && n >= 1;

/** The first model id an OpenAI-compatible server lists. */
async function servedModel(baseUrl: string, apiKey: string | undefined): Promise<string> {
  const { JsonEndpoint, DEFAULT_HTTP } = await import("../clients/http.ts");
  const headers: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  const endpoint = new JsonEndpoint(baseUrl.replace(/\/+$/, ""), {
    ...DEFAULT_HTTP,
    retries: 2,
    timeoutMs: 30_000,
    headers,
  });
  const list = await endpoint.request<{ data?: { id: string }[] }>("/models");
  const id = list.data?.[0]?.id;
  if (!id) throw new EndpointError(`${baseUrl}/models lists no model`, { fix: "name it with --served-model" });
  return id;
}

export default defineCommand({
  meta: {
    name: "eval",
    description: "Evaluate a model or an OpenAI-compatible endpoint on environments (pass@k table, --json)",
  },
  args: {
    model: { type: "string", description: "Model directory (HF layout) to evaluate in-process" },
    "base-url": { type: "string", description: "Or an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1" },
    tokenizer: {
      type: "string",
      description: "With --base-url: a model directory holding the served model's tokenizer (default: --model)",
    },
    "api-key": {
      type: "string",
      description: "With --base-url: sent as Authorization: Bearer KEY (default: $RLX_API_KEY, as rlx serve reads it)",
    },
    "served-model": {
      type: "string",
      description: "With --base-url: the model name to request (default: the first of GET /models)",
    },
    env: { type: "string", description: "Environment id(s), comma-separated (default: math)" },
    args: { type: "string", description: 'The env\'s args as JSON, e.g. \'{"operations": ["+"]}\' (one env only)' },
    n: { type: "string", description: "Held-out tasks per env; -1 = all (default 64)" },
    k: { type: "string", description: "Samples per task for avg@k / pass@k (default 8)" },
    temperature: { type: "string", description: "Sampling temperature of the k samples (default 1.0)" },
    "max-tokens": { type: "string", description: "Max new tokens per model turn (default 256)" },
    greedy: {
      type: "boolean",
      default: true,
      description: "Also one greedy sample per task: greedy pass@1 (--no-greedy to skip)",
    },
    seed: { type: "string", description: "Sampling seed (default 0)" },
    concurrency: { type: "string", description: "Rollouts in flight (default 64)" },
    "max-batch": { type: "string", description: "With --model: sequences decoded together (default 16)" },
    "max-model-len": {
      type: "string",
      description:
        "With --model: prompt + completion tokens per sequence (default: min(max_position_embeddings, 2048))",
    },
    json: { type: "boolean", description: "Print results as JSON, per-task rewards included" },
    out: { type: "string", description: "Also write the JSON results to this file" },
    tensorboard: {
      type: "string",
      description: "Also write TensorBoard event files under DIR/tensorboard/ (eval/<env>/<metric> at --step)",
    },
    step: { type: "string", description: "With --tensorboard: the step the results are logged at (default 0)" },
  },
  async run({ args }) {
    if (!args.model && !args["base-url"]) {
      throw new ConfigError(
        "rlx eval needs a model to evaluate: --model DIR (in-process) or --base-url URL (an OpenAI-compatible server)",
        {
          fix: "for example: rlx eval --model models/tiny --env math --n 32 --k 4",
        },
      );
    }
    const envIds = (args.env ?? "math")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    if (args.args !== undefined && envIds.length !== 1)
      throw new ConfigError(`--args applies to one env, but --env names ${envIds.length}`, {
        fix: "evaluate one env per command when it needs args",
      });
    let envArgs: Record<string, unknown> = {};
    if (args.args !== undefined) {
      try {
        envArgs = JSON.parse(args.args) as Record<string, unknown>;
      } catch (err) {
        throw new ConfigError(`--args is not valid JSON: ${(err as Error).message}`, {
          fix: `quote it for the shell: --args '{"digits": 3}'`,
        });
      }
    }
    const n = number(args.n, "n", 64, (x) => Number.isInteger(x) && (x >= 1 || x === -1), "a positive integer or -1");
    const k = number(args.k, "k", 8, isCount, "a positive integer");
    const temperature = number(args.temperature, "temperature", 1.0, (x) => x >= 0 && x <= 2, "a number in [0, 2]");
    const maxTokens = number(args["max-tokens"], "max-tokens", 256, isCount, "a positive integer");
    const seed = number(args.seed, "seed", 0, (x) => Number.isSafeInteger(x) && x >= 0, "a non-negative integer");
    const concurrency = number(args.concurrency, "concurrency", 64, isCount, "a positive integer");
    const maxBatch = number(args["max-batch"], "max-batch", 16, isCount, "a positive integer");
    const maxModelLen = args["max-model-len"]
      ? number(args["max-model-len"], "max-model-len", 0, isCount, "a positive integer")
      : undefined;
    const step = number(args.step, "step", 0, (x) => Number.isSafeInteger(x) && x >= 0, "a non-negative integer");
    const tokenizerDir = args["base-url"] ? (args.tokenizer ?? args.model) : args.model;
    if (!tokenizerDir)
      throw new ConfigError("--base-url needs the served model's tokenizer to render prompts", {
        fix: "pass --tokenizer DIR (a model directory with tokenizer.json and tokenizer_config.json)",
      });

    const { evaluate, failedRolloutsLine, loadEvalTasks } = await import("../eval/evaluate.ts");
    const { ChatRenderer } = await import("../model/render.ts");
    const { Tokenizer } = await import("../model/tokenizer.ts");
    const renderer = new ChatRenderer(Tokenizer.load(tokenizerDir));
    const envs = await Promise.all(envIds.map((id) => loadEvalTasks({ id, args: envArgs, numExamples: n, seed })));

    let client: SamplingClient;
    let close = async () => {};
    let maxContextTokens: number | undefined;
    if (args["base-url"]) {
      const { OpenAIClient } = await import("../clients/client.ts");
      const apiKey = args["api-key"] ?? (process.env.RLX_API_KEY || undefined);
      const model = args["served-model"] ?? (await servedModel(args["base-url"], apiKey));
      client = new OpenAIClient({ model, baseUrls: [args["base-url"]], retries: 2, ...(apiKey ? { apiKey } : {}) });
    } else {
      const { LocalClient } = await import("../engine/local.ts");
      const local = await LocalClient.fromModelDir(args.model!, { maxBatch, ...(maxModelLen ? { maxModelLen } : {}) });
      client = local;
      close = () => local.close();
      maxContextTokens = local.engine.maxModelLen;
    }

    const results: EnvEval[] = [];
    try {
      for (const { name, env, tasks } of envs) {
        const onProgress =
          process.stderr.isTTY && !args.json
            ? (done: number, total: number) => process.stderr.write(`\r${name}: ${done}/${total} rollouts`)
            : undefined;
        const result = await evaluate(client, renderer, name, env, tasks, {
          k,
          temperature,
          maxTokens,
          greedy: args.greedy,
          seed,
          concurrency,
          maxContextTokens,
          onProgress,
        });
        if (onProgress) process.stderr.write("\r\x1b[K");
        if (result.metrics.error_rate === 1) {
          throw new EndpointError(`every ${name} rollout failed; the first: ${result.firstError}`, {
            fix: args["base-url"]
              ? "check the server (GET /health) and --served-model"
              : "check the model directory, --max-tokens, and --max-model-len for long prompts",
          });
        }
        const failed = failedRolloutsLine(result);
        if (failed) console.error(`warning: ${failed}`);
        results.push(result);
      }
    } finally {
      await close();
    }

    const source = args["base-url"] ? { base_url: args["base-url"], tokenizer: tokenizerDir } : { model: args.model };
    const report = {
      ...source,
      settings: { n, k, temperature, max_tokens: maxTokens, greedy: args.greedy, seed },
      envs: results,
    };
    if (args.out) writeFileSync(args.out, `${JSON.stringify(report, null, 2)}\n`);
    if (args.tensorboard) {
      const { TensorBoardLog } = await import("../rundir/tensorboard.ts");
      const { evalMetrics } = await import("../eval/evaluate.ts");
      const tracker = TensorBoardLog.open(args.tensorboard, (line) => console.error(`warning: ${line}`));
      tracker.scalars(step, Object.assign({}, ...results.map((r) => evalMetrics(r))));
      tracker.texts(
        step,
        results.map((r) => ({
          tag: `replies/${r.env}`,
          text: r.results
            .slice(0, 4)
            .map((t) => `**${t.taskId}** rewards ${t.rewards.join(" ")}\n\n\`\`\`\n${t.firstReply}\n\`\`\``)
            .join("\n\n"),
        })),
      );
    }
    if (args.json) return console.log(JSON.stringify(report));
    const { evalTable } = await import("../eval/table.ts");
    console.log(evalTable(results));
    if (args.out) console.log(`\nwrote ${args.out}`);
  },
});
