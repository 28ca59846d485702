// SGLang's in-memory weight update, the orchestrator's half (docs/engines.md, "Weights in memory";
// the trainer's half is src/trainer/engine_send.ts). The request and answer fields are SGLang's
// io_struct InitWeightsUpdateGroupReqInput and UpdateWeightsFromDistributedReqInput (both answer
// {success, message}):
//
//   POST /init_weights_update_group {master_address, master_port, rank_offset, world_size,
//        group_name, backend}: the server's ranks join a c10d group with the trainer's rank 0;
//        it answers once the group has formed.
//   POST /update_weights_from_distributed {names, dtypes, shapes, group_name, flush_cache,
//        weight_version}: the server receives one broadcast from rank 0 per listed tensor, in
//        the listed order, and loads them; it answers once they are loaded.
//
// One group per server, of two ranks: rlx supports one rank per server (tp_size = dp_size = 1),
// which it checks through GET /get_server_info where the server answers it.
import { existsSync, readFileSync } from "node:fs";
import { EndpointError } from "../errors.ts";
import type { EngineManifest } from "../native/engine_group.ts";
import type { ChannelPlan } from "../native/weights.ts";
import type { JsonEndpoint } from "./http.ts";

interface Answer {
  success?: boolean;
  message?: string;
}

function engineOf(plan: ChannelPlan) {
  if (!plan.engine) throw new EndpointError("the weight channels' plan names no SGLang update groups");
  return plan.engine;
}

/** A server with more than one rank would join with more ranks than the group has: refused by name. */
async function checkOneRank(server: JsonEndpoint): Promise<void> {
  const info = await server
    .request<{ tp_size?: number; dp_size?: number }>("/get_server_info", undefined, AbortSignal.timeout(30_000))
    .catch(() => null);
  const ranks = (info?.tp_size ?? 1) * (info?.dp_size ?? 1);
  if (ranks !== 1)
    throw new EndpointError(
      `${server.url} serves with tp_size ${info?.tp_size ?? 1} and dp_size ${info?.dp_size ?? 1}: rlx's weight update groups take one rank per SGLang server`,
      {
        fix: 'start each SGLang server with one GPU (list several in base_urls), or set inference.weight_transfer = "disk"',
      },
    );
}

/** POSTs `body`, bounded by the group's timeout and a minute more (the server's own load); the answer's `success` must be true. */
async function call(server: JsonEndpoint, route: string, body: unknown, plan: ChannelPlan): Promise<void> {
  const limitMs = plan.timeoutMs + 60_000;
  let answer: Answer;
  try {
    answer = await server.request<Answer>(route, body, AbortSignal.timeout(limitMs));
  } catch (err) {
    if ((err as Error).name !== "TimeoutError") throw err;
    throw new EndpointError(`${server.url}${route}: no answer within ${limitMs / 1000} s`, {
      fix: "see the SGLang server's log; inference.transfer_timeout_s bounds each join and transfer",
    });
  }
  if (answer.success !== true)
    throw new EndpointError(
      `${server.url}${route} answered success = ${answer.success}: ${answer.message ?? "no message"}`,
    );
}

/** Every server joins its update group (plan.ports[i], the trainer's rank 0 waiting there). */
export async function joinUpdateGroups(servers: JsonEndpoint[], plan: ChannelPlan): Promise<void> {
  const { groupNames } = engineOf(plan);
  if (plan.ports.length !== servers.length)
    throw new EndpointError(`${plan.ports.length} weight update groups for ${servers.length} SGLang servers`);
  await Promise.all(
    servers.map(async (server, i) => {
      await checkOneRank(server);
      const body = {
        master_address: plan.host,
        master_port: plan.ports[i],
        rank_offset: 1,
        world_size: 2,
        group_name: groupNames[i],
        backend: plan.backend,
      };
      await call(server, "/init_weights_update_group", body, plan);
    }),
  );
}

function readManifest(path: string): EngineManifest {
  if (!existsSync(path))
    throw new EndpointError(`${path} is missing: the trainer writes it before it joins the update groups`);
  return JSON.parse(readFileSync(path, "utf8")) as EngineManifest;
}

/** Every server receives `version` from the trainer's broadcasts and loads it. */
export async function updateFromDistributed(
  servers: JsonEndpoint[],
  plan: ChannelPlan,
  version: number,
): Promise<void> {
  const { groupNames, manifest } = engineOf(plan);
  const { names, dtypes, shapes } = readManifest(manifest);
  await Promise.all(
    servers.map((server, i) =>
      call(
        server,
        "/update_weights_from_distributed",
        { names, dtypes, shapes, group_name: groupNames[i], flush_cache: true, weight_version: String(version) },
        plan,
      ),
    ),
  );
}
