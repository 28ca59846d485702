// The engines that can serve rlx's live policy, behind one interface: a sampling client, and
// `publish(dir, version)` that makes every server serve a published training step (an HF model
// directory, rundir's weights/step_N). Which one runs is `[inference] engine` (docs/engines.md):
//
//   rlx     `rlx serve --policy`: POST /update_weights {path, version}; completions report the
//           weights version that produced them (policy_version).
//   vllm    vLLM's OpenAI server with its dev-mode routes (VLLM_SERVER_DEV_MODE=1), as in vLLM's
//           api_server: POST /collective_rpc {method: "update_config", args: [{model_config:
//           {model: DIR}}]} then {method: "reload_weights"} (the worker reloads from the model
//           path; vLLM's examples/offline_inference/skip_loading_weights_in_engine_init.py), then
//           POST /reset_prefix_cache so no cached prefix of the old weights is reused.
//   sglang  SGLang's native API (sglang_client.ts): POST /update_weights_from_disk
//           {model_path, weight_version}; its answer's `success` must be true. With
//           weight_transfer = "c10d", its update groups instead (sglang_updates.ts).
//
// vLLM and SGLang do not say (in every version) which weights produced a completion, so rlx stamps each one with the
// version the engine held when the request was sent: the oldest weights that can have produced
// any of its tokens, so staleness is never under-counted (versionStamped below).
import { EndpointError } from "../errors.ts";
import type { ChannelPlan } from "../native/weights.ts";
import { OpenAIClient } from "./client.ts";
import { DEFAULT_HTTP, JsonEndpoint } from "./http.ts";
import { SglangClient } from "./sglang_client.ts";
import { joinUpdateGroups, updateFromDistributed } from "./sglang_updates.ts";
import type { SamplingClient } from "./types.ts";

export type EngineKind = "rlx" | "vllm" | "sglang";

export interface PolicyEngine {
  readonly kind: EngineKind;
  readonly client: SamplingClient;
  /** Whether completions carry the weights version that produced them. */
  readonly reportsVersion: boolean;
  /** What can be checked before the run: the routes publish needs are on. */
  check(): Promise<void>;
  /** Every server serves the model directory `dir` (absolute) as `version` once this resolves. */
  publish(dir: string, version: number): Promise<void>;
  /** weight_transfer = "c10d" (rlx, SGLang): server i joins the channel or group at plan.ports[i]. */
  joinChannels?(plan: ChannelPlan): Promise<void>;
  /** weight_transfer = "c10d": every server receives `version` over its channel and serves it. */
  receive?(version: number): Promise<void>;
  /** rlx only: the server at `url` is gone; false when no server is left. */
  lose?(url: string, reason: string): boolean;
}

export interface EngineOptions {
  baseUrls: string[];
  model: string;
  apiKey?: string;
}

/** The server's root (base URL without /v1): where the non-OpenAI routes live. */
const root = (baseUrl: string) => baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");

function rootEndpoints(options: EngineOptions): JsonEndpoint[] {
  const headers: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
  // No retries: a retried reload would load twice.
  return options.baseUrls.map((url) => new JsonEndpoint(root(url), { ...DEFAULT_HTTP, retries: 0, headers }));
}

/** POST without retries; some of vLLM's routes answer 200 with an empty body. */
async function post(server: JsonEndpoint, path: string, body?: unknown): Promise<void> {
  const response = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...server.options.headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(server.options.timeoutMs),
  }).catch((err: Error) => {
    throw new EndpointError(`${server.url}${path}: connection failed: ${err.message}`);
  });
  if (!response.ok)
    throw new EndpointError(
      `${server.url}${path}: status ${response.status}: ${(await response.text()).slice(0, 500)}`,
    );
}

/** One `rlx serve` of a policy: its OpenAI base URL, its root, and its weight channel's index. */
interface RlxServer {
  url: string;
  root: JsonEndpoint;
  channel: number;
}

class RlxEngine implements PolicyEngine {
  readonly kind = "rlx";
  readonly reportsVersion = true;
  readonly client: OpenAIClient;

  private servers: RlxServer[];

  constructor(
    options: EngineOptions,
    private readonly onLost?: LostServer,
  ) {
    this.client = new OpenAIClient(options);
    // a receive lasts as long as the transfer: bounded by the channel's own timeout instead
    this.servers = rootEndpoints(options).map((e, i) => ({
      url: options.baseUrls[i]!,
      root: new JsonEndpoint(e.url, { ...e.options, timeoutMs: 2 ** 31 - 1 }),
      channel: i,
    }));
  }

  async check(): Promise<void> {}

  publish(dir: string, version: number): Promise<void> {
    return this.everyServer("/update_weights", () => ({ path: dir, version }));
  }

  async joinChannels(plan: ChannelPlan): Promise<void> {
    if (plan.ports.length !== this.servers.length)
      throw new EndpointError(`${plan.ports.length} weight channels for ${this.servers.length} policy servers`);
    await this.everyServer("/weight_channel", (server) => ({
      host: plan.host,
      port: plan.ports[server.channel],
      backend: plan.backend,
      timeout_ms: plan.timeoutMs,
      ...(plan.lora ? { lora: plan.lora } : {}),
    }));
  }

  receive(version: number): Promise<void> {
    return this.everyServer("/update_weights", () => ({ version, transfer: "c10d" }));
  }

  /** A server that is gone (its process exited): dropped; false when it was the last one. */
  lose(url: string, reason: string): boolean {
    const server = this.servers.find((s) => s.url === url);
    if (server) this.drop(server, reason);
    return this.servers.length > 0;
  }

  /**
   * POSTs to every server. A failure stops the run, or with onLost (inference.lost_server =
   * "continue") drops that server and goes on with the others, unless none is left.
   */
  private async everyServer(path: string, body: (server: RlxServer) => unknown): Promise<void> {
    const servers = this.servers;
    const results = await Promise.allSettled(servers.map((server) => post(server.root, path, body(server))));
    const failed = results.flatMap((r, i) =>
      r.status === "rejected" ? [{ server: servers[i]!, err: r.reason as Error }] : [],
    );
    if (failed.length === 0) return;
    if (!this.onLost || failed.length === servers.length) throw failed[0]!.err;
    for (const { server, err } of failed) {
      this.drop(server, err.message);
      // an alive server leaves its channel, so the trainer's next send to it fails at once
      void post(server.root, "/weight_channel", { leave: true }).catch(() => {});
    }
  }

  private drop(server: RlxServer, reason: string): void {
    this.servers = this.servers.filter((s) => s !== server);
    this.client.drop(server.url);
    this.onLost?.(server.url, reason, this.servers.length);
  }
}

class VllmEngine implements PolicyEngine {
  readonly kind = "vllm";
  readonly reportsVersion = false;
  readonly client: OpenAIClient;
  private readonly roots: JsonEndpoint[];

  constructor(options: EngineOptions) {
    this.client = new OpenAIClient(options);
    this.roots = rootEndpoints(options);
  }

  async check(): Promise<void> {
    for (const server of this.roots) {
      const probe = await fetch(`${server.url}/is_sleeping`, { headers: server.options.headers }).catch(() => null);
      if (!probe?.ok)
        throw new EndpointError(
          `${server.url}/is_sleeping answered ${probe ? probe.status : "nothing"}: vLLM's dev-mode routes, which rlx reloads weights through, are off`,
          { fix: "start vLLM with VLLM_SERVER_DEV_MODE=1 (docs/engines.md has the command line)" },
        );
    }
  }

  /** vLLM keeps no version (versionStamped tracks it), so `version` is not sent. */
  async publish(dir: string): Promise<void> {
    await Promise.all(
      this.roots.map(async (server) => {
        await post(server, "/collective_rpc", { method: "update_config", args: [{ model_config: { model: dir } }] });
        await post(server, "/collective_rpc", { method: "reload_weights" });
        await post(server, "/reset_prefix_cache");
      }),
    );
  }
}

class SglangEngine implements PolicyEngine {
  readonly kind = "sglang";
  readonly reportsVersion = false;
  readonly client: SglangClient;
  private readonly roots: JsonEndpoint[];

  /** The update routes answer once the group formed or the weights arrived: bounded by the group's timeout. */
  private readonly updates: JsonEndpoint[];
  private plan: ChannelPlan | undefined;

  constructor(options: EngineOptions) {
    this.client = new SglangClient({ ...options, baseUrls: options.baseUrls.map(root) });
    this.roots = rootEndpoints(options);
    this.updates = this.roots.map((e) => new JsonEndpoint(e.url, { ...e.options, timeoutMs: 2 ** 31 - 1 }));
  }

  async check(): Promise<void> {}

  async joinChannels(plan: ChannelPlan): Promise<void> {
    await joinUpdateGroups(this.updates, plan);
    this.plan = plan;
  }

  async receive(version: number): Promise<void> {
    if (!this.plan) throw new EndpointError("the SGLang servers have not joined their weight update groups");
    await updateFromDistributed(this.updates, this.plan, version);
  }

  async publish(dir: string, version: number): Promise<void> {
    await Promise.all(
      this.roots.map(async (server) => {
        const answer = await server.request<{ success?: boolean; message?: string }>("/update_weights_from_disk", {
          model_path: dir,
          weight_version: String(version),
        });
        if (answer.success !== true)
          throw new EndpointError(
            `${server.url}/update_weights_from_disk refused ${dir}: ${answer.message ?? "no message"}`,
          );
      }),
    );
  }
}

/** Told of a policy server the run goes on without (inference.lost_server = "continue"). */
export type LostServer = (url: string, reason: string, remaining: number) => void;

export function policyEngine(kind: EngineKind, options: EngineOptions, onLost?: LostServer): PolicyEngine {
  if (kind === "vllm") return new VllmEngine(options);
  if (kind === "sglang") return new SglangEngine(options);
  return new RlxEngine(options, onLost);
}

/**
 * The engine's client with each completion stamped with `version()` as it was when the request
 * was sent, for engines that do not report it.
 */
export function versionStamped(client: SamplingClient, version: () => number): SamplingClient {
  return {
    complete: async (request) => {
      const sent = version();
      return { ...(await client.complete(request)), policyVersion: sent };
    },
    score: (sequences) => client.score(sequences),
    ...(client.scoreTop ? { scoreTop: (sequences, k) => client.scoreTop!(sequences, k) } : {}),
  };
}
