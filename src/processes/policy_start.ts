// How `rlx train` starts its live policy (docs/run-directory.md, "Who runs"): external servers
// named in [inference] base_urls (rlx serve, or vLLM / SGLang per [inference] engine: their routes
// checked and their logprobs probed for temperature first, docs/engines.md), `[inference] servers` spawned `rlx serve --policy` children, or
// the engine in this process. Spawned servers are locked down as docs/serve.md says: each run
// makes a fresh random API key ($RLX_API_KEY instead when set, for whoever else queries them),
// handed over in their environment, not on a command line that `ps` shows, and confines their
// /update_weights to the run's own weights/ directory.
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import { ConfigError, RlxError } from "../errors.ts";
import { API_KEY_ENV } from "../serve/auth.ts";
import { DEFAULT_HTTP, JsonEndpoint } from "../clients/http.ts";
import { type LostServer, type PolicyEngine, policyEngine } from "../clients/policy_engines.ts";
import { checkTemperedLogprobs } from "../clients/tempered_probe.ts";
import { Tokenizer } from "../model/tokenizer.ts";
import { readModelConfig } from "../model/config.ts";
import { baseModelDir } from "../model/hf.ts";
import { CORE_SHARE_ENV, CoreShare } from "../native/core_share.ts";
import { loadNative } from "../native/ffi.ts";
import { schedulePath } from "../rundir/paths.ts";
import type { Children } from "./children.ts";
import { InProcessPolicy, type LivePolicy, RemotePolicy } from "./live_policy.ts";

export type InferenceMode = "auto" | "spawn" | "in-process";

/** Tokens the policy serves beyond seq_len, for scoring prefixed sequences (OPSD's hint). */
const SCORE_MARGIN = 512;

/** The model name spawned policy servers serve under. */
const POLICY_NAME = "policy";

/** Where the policy runs: inference.device, or the trainer's device for "auto". */
export const policyDevice = (config: ResolvedConfig) =>
  config.inference.device === "auto" ? config.trainer.device : config.inference.device;

export interface PolicyStart {
  runDir: string;
  /** The weights the policy starts from (the base model, or a checkpoint's). */
  modelDir: string;
  version: number;
  mode: InferenceMode;
  children: Children;
  /** RLX_THREADS of each spawned server. */
  threads?: number;
  /** The file the policy and the trainer hand the cores over in (launch.ts), if they share them. */
  coreShare?: string;
  /** Where a lost policy server is reported (inference.lost_server = "continue"). */
  warn?: (line: string) => void;
}

/** With inference.lost_server = "continue": reports a server the run goes on without. */
function lostServer(config: ResolvedConfig, start: PolicyStart): LostServer | undefined {
  if (config.inference.lost_server !== "continue") return undefined;
  return (url, reason, remaining) =>
    start.warn?.(
      `policy server ${url} lost (${reason}); going on with ${remaining} (inference.lost_server = "continue")`,
    );
}

/**
 * The spawned or in-process policy's context and K/V budget. Rollouts never exceed seq_len (the
 * rollout driver stops there); the margin is for sequences the policy only scores, such as OPSD's
 * demonstration hint prepended to a rollout. A kv_tokens that cannot hold one such sequence is
 * refused naming the key.
 */
export function policyLimits(config: ResolvedConfig, modelDir: string): { maxModelLen: number; kvTokens?: number } {
  const maxModelLen = Math.min(
    config.orchestrator.seq_len + SCORE_MARGIN,
    readModelConfig(baseModelDir(modelDir)).shim.max_position_embeddings, // a checkpoint's adapter: its base
  );
  const kvTokens = config.inference.kv_tokens;
  if (kvTokens !== undefined && kvTokens < maxModelLen)
    throw new ConfigError(
      `inference.kv_tokens = ${kvTokens} cannot hold one sequence: the policy's max model len is ${maxModelLen} (orchestrator.seq_len + ${SCORE_MARGIN} for scoring, within the model's positions)`,
      { fix: `set inference.kv_tokens to at least ${maxModelLen}, or lower orchestrator.seq_len` },
    );
  return kvTokens === undefined ? { maxModelLen } : { maxModelLen, kvTokens };
}

/** Starts the policy: external servers, spawned `rlx serve --policy` servers, or in-process. */
export async function startPolicy(config: ResolvedConfig, start: PolicyStart): Promise<LivePolicy> {
  const inf = config.inference;
  if (inf.base_urls.length > 0) {
    const apiKey = externalApiKey(inf.api_key_var);
    const model = await servedModelName(inf.base_urls[0]!, apiKey);
    const engine = policyEngine(
      inf.engine,
      { baseUrls: inf.base_urls, model, ...(apiKey ? { apiKey } : {}) },
      lostServer(config, start),
    );
    await engine.check();
    if (inf.engine !== "rlx")
      await checkTemperedLogprobs(engine.client, Tokenizer.load(start.modelDir).encode("1 + 1 ="), inf.engine);
    const policy = new RemotePolicy(engine, 0);
    if (start.version > 0) await policy.load(resolve(start.modelDir), start.version);
    return policy;
  }
  // A deterministic run's rollouts must not depend on which requests came first.
  const prefixCaching = inf.prefix_caching && !config.deterministic;
  const { maxModelLen, kvTokens } = policyLimits(config, start.modelDir);
  if (start.mode === "in-process") {
    // One intra-op thread here, unless the cores are handed over (then the engine sets its own
    // threads round by round): the trainer child computes at the same time on the other cores.
    await loadNative(config.deterministic ? 1 : Number(process.env.RLX_THREADS ?? 1));
    return InProcessPolicy.create(start.modelDir, start.version, {
      maxBatch: inf.max_batch,
      maxModelLen,
      ...(kvTokens === undefined ? {} : { kvTokens }),
      reloadMode: inf.reload,
      prefixCaching,
      ...(start.coreShare ? { coreShare: CoreShare.open(start.coreShare, "generator") } : {}),
      dtype: config.model.dtype,
      device: policyDevice(config),
      ...(inf.record_schedule
        ? { schedule: { path: schedulePath(start.runDir, "local"), model: resolve(start.modelDir) } }
        : {}),
    });
  }
  const apiKey = process.env[API_KEY_ENV] || randomBytes(24).toString("hex");
  const weightsRoot = join(start.runDir, "weights");
  mkdirSync(weightsRoot, { recursive: true });
  const urls: string[] = [];
  let engine: PolicyEngine | undefined;
  for (let i = 0; i < inf.servers; i++) {
    const port = inf.port + i;
    const url = `http://${inf.host}:${port}/v1`;
    assertPortFree(inf.host, port);
    start.children.spawn({
      name: `policy-${i}`,
      ...(inf.lost_server === "continue"
        ? { survive: (how: string) => engine?.lose?.(url, `its process ${how}`) ?? false }
        : {}),
      args: [
        "serve",
        "--model",
        resolve(start.modelDir),
        "--served-model-name",
        POLICY_NAME,
        "--policy",
        "--weights-root",
        weightsRoot,
        "--policy-version",
        String(start.version),
        "--host",
        inf.host,
        "--port",
        String(port),
        "--max-batch",
        String(inf.max_batch),
        "--max-model-len",
        String(maxModelLen),
        ...(kvTokens === undefined ? [] : ["--kv-tokens", String(kvTokens)]),
        "--reload-mode",
        inf.reload,
        ...(prefixCaching ? [] : ["--no-prefix-caching"]),
        ...(inf.record_schedule ? ["--schedule", schedulePath(start.runDir, `policy-${i}`)] : []),
        "--dtype",
        config.model.dtype,
        "--device",
        policyDevice(config),
      ],
      env: {
        RLX_PARENT_PID: String(process.pid),
        [API_KEY_ENV]: apiKey,
        ...(start.threads ? { RLX_THREADS: String(start.threads) } : {}),
        ...(start.coreShare ? { [CORE_SHARE_ENV]: start.coreShare } : {}),
      },
    });
    urls.push(url);
  }
  await Promise.race([Promise.all(urls.map((url) => waitForHealth(url))), start.children.failure]);
  engine = policyEngine("rlx", { baseUrls: urls, model: POLICY_NAME, apiKey }, lostServer(config, start));
  return new RemotePolicy(engine, start.version);
}

/**
 * Throws when something already listens where a spawned policy server is to: the server could
 * not bind, yet its health check would pass against the other process (another run's server,
 * which then refuses this run's key).
 */
export function assertPortFree(host: string, port: number): void {
  try {
    Bun.listen({ hostname: host, port, socket: { data() {} } }).stop(true);
  } catch {
    throw new ConfigError(`inference.port: ${host}:${port} is in use (another rlx train or server?)`, {
      fix: `set inference.port to a free port (e.g. --set inference.port=${port + 100}), or stop what listens there`,
    });
  }
}

/** The key external policy servers want, from the variable [inference] api_key_var names. */
function externalApiKey(variable: string | undefined): string | undefined {
  if (variable === undefined) return undefined;
  const key = process.env[variable];
  if (!key)
    throw new ConfigError(`inference.api_key_var: $${variable} is not set`, {
      fix: `export ${variable}=KEY (the key the policy servers were started with), or drop inference.api_key_var`,
    });
  return key;
}

/** The model an external server serves (the first of its GET /v1/models). */
async function servedModelName(baseUrl: string, apiKey: string | undefined): Promise<string> {
  const headers: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  const list = await new JsonEndpoint(baseUrl.replace(/\/+$/, ""), { ...DEFAULT_HTTP, retries: 3, headers }).request<{
    data?: Array<{ id: string }>;
  }>("/models");
  const id = list.data?.[0]?.id;
  if (!id)
    throw new RlxError(`${baseUrl}/models lists no model`, {
      fix: "check [inference] base_urls: each must be an OpenAI-compatible server ending in /v1",
    });
  return id;
}

async function waitForHealth(baseUrl: string, timeoutMs = 120_000): Promise<void> {
  const url = `${baseUrl.replace(/\/v1$/, "")}/health`;
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(2000) })).ok) return;
    } catch {}
    await Bun.sleep(200);
  }
  throw new RlxError(`the policy server ${baseUrl} did not become healthy within ${timeoutMs / 1000} s`, {
    fix: "see logs/policy-*.log in the run directory",
  });
}
