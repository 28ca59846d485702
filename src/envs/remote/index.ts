// An environment served by another process (a Python env, any language), reached by the URL an env
// entry gives as its `id` (protocol.ts). It becomes an ordinary Env, so its algorithm, sampler and
// loss resolve per env as any other's, and `rlx eval` and `rlx env` take it as they take a built-in:
//   - step-driven (`shape = "step"`, OpenEnv-like): `open` resets a session per rollout, each model
//     turn is a /step answered with the next messages, a reward and `done` (src/rollout/driver.ts);
//   - env-driven (`shape = "env"`, verifiers-like): `drive` hands the server the task and a policy
//     endpoint with a key of the episode's own; the server runs the episode (src/rollout/served.ts).
// The reward is the server's (the summed steps, or the run's); a rollout's reward is read back from
// `rollout.info.envReward`. A step-driven env can also score a conversation it did not run (a
// judge's exact reward) by replaying its assistant turns through a fresh session.
//
// Faults are data: a server that is down, slow (past `timeout_s`) or answers what the protocol does
// not allow fails the rollout with the reason. Calls that change a session are never retried (a
// repeated step would act twice); /info and /tasks are.
import { z } from "zod";
import { ConfigError, EnvError } from "../../errors.ts";
import { JsonEndpoint, Semaphore } from "../../clients/http.ts";
import type { ChatMessage } from "../../data/chat.ts";
import type { Rollout } from "../../data/types.ts";
import type { Env, EnvDefinition, EnvReward, EnvSession, RewardResult, Task } from "../types.ts";
import { call, type EnvInfo, infoAnswer, resetAnswer, runAnswer, stepAnswer, tasksAnswer } from "./protocol.ts";

/** An env entry's `remote` table. */
export interface RemoteSettings {
  /** The environment variable whose value is sent as `Authorization: Bearer ...`. */
  apiKeyVar?: string;
  /** Per call; an env-driven episode is one call. */
  timeoutMs: number;
  /** Sessions or episodes open at once. */
  concurrency: number;
  /** The shape the config expects; the server's /info must agree. */
  shape?: "step" | "env";
}

/** An env entry's `remote` table (config files): settings for the env server its `id` names. */
export const remoteBlock = z
  .strictObject({
    /** The environment variable holding the env server's key (sent as Authorization: Bearer). */
    api_key_var: z.string().min(1).optional(),
    /** Per call to the server; an env-driven episode is one call. Past it the rollout fails. */
    timeout_s: z.number().positive().default(300),
    /** Sessions (step) or episodes (env) open at once; the others wait. */
    concurrency: z.number().int().positive().default(64),
    /** "step" or "env": checked against the server's /info (absent: whatever it says). */
    shape: z.enum(["step", "env"]).optional(),
  })
  .prefault({});

export const DEFAULT_REMOTE: RemoteSettings = remoteSettings(remoteBlock.parse(undefined));

/** The settings of a parsed `remote` table. */
export function remoteSettings(block: z.output<typeof remoteBlock>): RemoteSettings {
  return {
    timeoutMs: block.timeout_s * 1000,
    concurrency: block.concurrency,
    ...(block.api_key_var ? { apiKeyVar: block.api_key_var } : {}),
    ...(block.shape ? { shape: block.shape } : {}),
  };
}

/** Whether an env id is an env server's URL. */
export function isEnvUrl(id: string): boolean {
  return /^https?:\/\//.test(id);
}

/** Reads the server's /info and returns its definition; `where` names the key that gave the URL. */
export async function loadRemoteEnv(url: string, settings: RemoteSettings, where: string): Promise<EnvDefinition> {
  const base = url.replace(/\/+$/, "");
  const headers: Record<string, string> = {};
  if (settings.apiKeyVar) {
    const key = process.env[settings.apiKeyVar];
    if (!key)
      throw new ConfigError(`${where}: remote.api_key_var names ${settings.apiKeyVar}, which is not set`, {
        fix: `export ${settings.apiKeyVar}=... (the env server's key) before starting rlx`,
      });
    headers.authorization = `Bearer ${key}`;
  }
  // The HTTP gate never holds back a session's call: sessions are limited by `slots`.
  const http = {
    timeoutMs: settings.timeoutMs,
    backoffMs: 250,
    concurrency: Math.max(256, 2 * settings.concurrency),
    headers,
  };
  const listing = new JsonEndpoint(base, { ...http, retries: 3 });
  const session = new JsonEndpoint(base, { ...http, retries: 0 });
  let info: EnvInfo;
  try {
    info = await call(listing, "/info", undefined, infoAnswer);
  } catch (err) {
    throw new ConfigError(`${where}: the env server does not answer: ${(err as Error).message}`, {
      fix: "start the env server first (GET /info must answer), or correct the URL",
    });
  }
  if (settings.shape && settings.shape !== info.shape)
    throw new ConfigError(
      `${where}: remote.shape is "${settings.shape}" but the server at ${base} is "${info.shape}"`,
      {
        fix: `set remote.shape = "${info.shape}" or leave it out`,
      },
    );
  return {
    id: info.id,
    description: `${info.description} (${info.shape}-driven, served at ${base})`,
    create: (args: Record<string, unknown>) => remoteEnv(info, args ?? {}, listing, session, slotsOf(base, settings)),
  };
}

/** One limit per server, however many envs (train, eval) reach it: the first entry's concurrency. */
const serverSlots = new Map<string, Semaphore>();
function slotsOf(base: string, settings: RemoteSettings): Semaphore {
  let slots = serverSlots.get(base);
  if (!slots) serverSlots.set(base, (slots = new Semaphore(settings.concurrency)));
  return slots;
}

function remoteEnv(
  info: EnvInfo,
  args: Record<string, unknown>,
  listing: JsonEndpoint,
  server: JsonEndpoint,
  slots: Semaphore,
): Env {
  const open = async (task: Task): Promise<EnvSession> => {
    const release = await slots.acquire();
    try {
      const reset = await call(server, "/reset", { task_id: task.id, args }, resetAnswer);
      const id = reset.session_id;
      return {
        prompt: reset.messages?.length ? (reset.messages as ChatMessage[]) : undefined,
        async step(reply, signal) {
          const step = await call(server, "/step", { session_id: id, message: reply }, stepAnswer, signal);
          return { ...step, messages: step.messages as ChatMessage[] };
        },
        async close() {
          try {
            await server.request("/close", { session_id: id });
          } finally {
            release();
          }
        },
      };
    } catch (err) {
      release();
      throw err;
    }
  };

  const env: Env = {
    tools: info.tools.map((spec) => ({
      spec,
      run: () => {
        throw new EnvError(`${spec.function.name} runs in the env server at ${listing.url}, not in rlx`, {
          fix: "a remote env's tools are called by its sessions (/step) or its episodes (/run)",
        });
      },
    })),
    maxTurns: info.max_turns,
    async load(split, seed) {
      const { tasks } = await call(listing, "/tasks", { split, seed, args }, tasksAnswer);
      return tasks.map((t) => ({ ...t, prompt: t.prompt as ChatMessage[] }));
    },
    async reward(task: Task, rollout: Rollout): Promise<RewardResult> {
      const own = rollout.info.envReward as EnvReward | undefined;
      if (own) return { reward: own.reward, metrics: own.metrics };
      if (info.shape === "env")
        throw new Error(`env ${info.id} is env-driven: it scores only the episodes it runs itself`);
      return replay(open, task, rollout);
    },
  };
  if (info.shape === "step") env.open = open;
  else
    env.drive = async ({ task, policy, signal }) => {
      const release = await slots.acquire();
      try {
        const body = {
          task_id: task.id,
          args,
          policy: { base_url: policy.baseUrl, api_key: policy.apiKey, model: policy.model },
        };
        return await call(server, "/run", body, runAnswer, signal);
      } finally {
        release();
      }
    };
  return env;
}

/** A step-driven env's reward for a conversation it did not run: its assistant turns replayed. */
async function replay(open: (task: Task) => Promise<EnvSession>, task: Task, rollout: Rollout): Promise<RewardResult> {
  const session = await open(task);
  const total: EnvReward = { reward: 0, metrics: {} };
  try {
    for (const reply of rollout.messages.filter((m) => m.role === "assistant")) {
      const step = await session.step(reply);
      total.reward += step.reward;
      Object.assign(total.metrics, step.metrics);
      if (step.done) break;
    }
  } finally {
    await session.close().catch(() => {});
  }
  return total;
}
