// A multi-agent episode (docs/algorithms.md, "Roles"): the env's `episode(ctx)` chooses the turn
// order and each role's view; every `ctx.turn(role, messages)` is one turn of the rollout driver
// (driver.ts: rendered with the chat template, sampled by the role's client, tokens in / tokens
// out), appended to that trace's rollout as a sample of its own. Each trace that took a turn
// becomes one Rollout tagged with its role, with the reward the env gave it, so each role's tokens
// are attributed to that role alone.
//
// A role played by a frozen endpoint, or configured with `train = false`, gives traces with
// `trains: false`: they are recorded (metrics, the episode's outcome) but never reach an
// algorithm or a step file. A trace may spawn a group of another train env (`spawn`): the
// orchestrator runs it, and the trace's reward waits for it in the barrier book. Failure is data,
// as in the driver: a turn that fails, an episode that throws, or a trace without a finite reward
// (one that spawned nothing) fails every trace of the episode.
import type { Rollout } from "../data/types.ts";
import type { Env, EpisodeResult, Task } from "../envs/types.ts";
import { hashString } from "../envs/random.ts";
import type { SamplingClient } from "../clients/types.ts";
import type { ChatMessage } from "../data/chat.ts";
import { type RolloutRequest, runRollout } from "./driver.ts";

/** Who plays a role: its sampling client, and whether its tokens train. */
export interface RolePlayer {
  client: SamplingClient;
  trains: boolean;
}

export interface EpisodeRequest extends Omit<RolloutRequest, "client" | "env"> {
  env: Env & Required<Pick<Env, "episode">>;
  /** Per role; a role not listed is played by `client` and trains. */
  players: ReadonlyMap<string, RolePlayer>;
  client: SamplingClient;
}

/** One turn: no tools, one model turn, no reward (the episode's outcome is the reward). */
const ONE_TURN: Env = {
  tools: [],
  maxTurns: 1,
  load: async () => [],
  reward: () => ({ reward: 0, metrics: {} }),
};

/** Runs one episode; one rollout per trace that took a turn (a single failed one when none did). */
export async function runEpisode(req: EpisodeRequest): Promise<Rollout[]> {
  const traces = new Map<string, Rollout>();
  const started = performance.now();
  const traceOf = (name: string, role: string): Rollout => {
    let trace = traces.get(name);
    if (!trace) {
      const player = req.players.get(role);
      trace = {
        id: `${req.id}/${name}`,
        env: req.envId,
        taskId: req.task.id,
        groupId: req.groupId,
        task: req.task,
        messages: [],
        segments: [],
        numSamples: 0,
        reward: 0,
        metrics: {},
        stopReason: "done",
        policyVersion: -1,
        numTurns: 0,
        info: { episode: req.id, trace: name },
        role,
        ...(player && !player.trains ? { trains: false } : {}),
      };
      traces.set(name, trace);
    }
    return trace;
  };
  const turn = async (role: string, messages: ChatMessage[], options: { trace?: string } = {}) => {
    const trace = traceOf(options.trace ?? role, role);
    const task: Task = { id: req.task.id, prompt: messages, answer: req.task.answer };
    const one = await runRollout({
      ...req,
      id: `${trace.id}#${trace.numTurns}`,
      env: ONE_TURN,
      task,
      client: req.players.get(role)?.client ?? req.client,
      sampling: { ...req.sampling, seed: hashString(`${req.sampling.seed ?? 0}:${trace.id}:${trace.numTurns}`) },
    });
    if (one.error) throw new Error(`${role}'s turn ${trace.numTurns + 1} failed: ${one.error}`);
    const offset = trace.numSamples;
    for (const segment of one.segments) trace.segments.push({ ...segment, sample: offset + segment.sample });
    trace.numSamples += one.numSamples;
    if (trace.numTurns === 0) trace.policyVersion = one.policyVersion;
    trace.numTurns += one.numTurns;
    trace.messages = one.messages;
    trace.stopReason = one.stopReason;
    const reply = one.messages.at(-1);
    return reply?.role === "assistant" && typeof reply.content === "string" ? reply.content : "";
  };

  let result: EpisodeResult | undefined;
  let error: string | undefined;
  try {
    result = await req.env.episode({ task: req.task, turn });
    for (const name of traces.keys()) {
      if (result.spawn?.[name]) continue; // its reward is settled once its spawned group finishes
      const reward = result.rewards[name];
      if (typeof reward !== "number" || !Number.isFinite(reward))
        throw new Error(`env ${req.envId} gave trace "${name}" no finite reward (${reward})`);
    }
  } catch (err) {
    error = `episode failed: ${err instanceof Error ? err.message : String(err)}`;
  }
  if (traces.size === 0) traceOf("episode", "episode");
  const durationMs = Math.round(performance.now() - started);
  return [...traces.values()].map((trace) => {
    const name = trace.info.trace as string;
    trace.info.durationMs = durationMs;
    if (error) {
      trace.error = error;
      trace.stopReason = "error";
      trace.metrics = { num_turns: trace.numTurns, error: 1 };
      return trace;
    }
    trace.reward = result!.rewards[name] ?? 0;
    trace.metrics = { ...result!.metrics, num_turns: trace.numTurns };
    const barriers = result!.barriers?.[name];
    if (barriers) trace.info.barriers = barriers;
    const spawn = result!.spawn?.[name];
    if (spawn) trace.info.spawn = spawn;
    return trace;
  });
}
