// The groups of one batch (step 2 of the step loop, src/orchestrator/loop.ts; docs/task_samplers.md).
// Groups are drawn (env by ratio, then the env's sampler: a fresh task, or a stored group to
// replay) until they hold batch_size rollouts and run all at once, each env with its own algorithm
// and sampling source: scoreRollout as each rollout finishes; scoreGroup once its group has, in the
// env's barrier book (barriers.ts). A trace that spawns a group of another env (a proposer's solver
// panel) has it run once the parent group has finished, as an ordinary group of that env that
// rides along with its parent (batch_size counts drawn groups only); what it scored goes back to
// the parent's book. Then,
// in draw order, a group older than max_off_policy_steps is dropped (counted) and replaced, and
// each finished fresh group updates its task's statistics and passes its env sampler's admission
// gate or is replaced. A failing hook fails its rollouts, as data, never the run.
//
// Replacement rounds draw ahead: once a gate has rejected groups this step, a round draws for
// what is missing divided by the share admitted so far (at most MAX_DRAW_AHEAD times it), so a
// gate that rejects half the groups needs about two rounds rather than one per halving. An
// admitted group drawn ahead that the batch no longer needs waits in the run-level draw's pending
// list (checkpointed with it) and is the first group of the next step; one the gate admitted only
// because its bound was reached is discarded (counted as rejected). Without rejections nothing is
// drawn ahead, so a run without a gate draws exactly as before.
import { finishRollout, isTrainable } from "../algorithms/base.ts";
import type { ResolvedConfig } from "../config/resolve.ts";
import type { Rollout } from "../data/types.ts";
import { hashString } from "../envs/random.ts";
import { RlxError } from "../errors.ts";
import type { ChatRenderer } from "../model/render.ts";
import { runRollout } from "../rollout/driver.ts";
import { runEpisode } from "../rollout/episode.ts";
import { type SpawnedBy, spawnedBy, spawnGroupId, spawnOf } from "../envs/spawn.ts";
import { failAsData } from "./hooks.ts";
import type { Progress } from "./metrics/log.ts";
import type { Draw, TaskSampler } from "./task_sampler.ts";
import { algorithmOf, type TrainEnv } from "./setup.ts";

/** What collecting a batch needs from the run. */
export interface CollectContext {
  config: ResolvedConfig;
  envs: TrainEnv[];
  renderer: ChatRenderer;
  warn: (line: string) => void;
  /** Where failed rollouts are recorded (rollouts/failed_step_N.jsonl); none without it. */
  runDir?: string;
}

/** A replacement round draws at most this many times what is missing. */
export const MAX_DRAW_AHEAD = 2;

/** What happened to one env's groups while a batch was collected (the sampling/<env>/* metrics). */
export interface EnvAdmission {
  /** Fresh groups the gate admitted (all of them without a gate). */
  admitted: number;
  /** Fresh groups the gate rejected (replaced by others). */
  rejected: number;
  /** Groups admitted past the over-sampling bound, ungated. */
  overBound: number;
  /** Stored groups trained again. */
  replayed: number;
  /** Rollouts the gate rejected (what the over-sampling bound counts). */
  rejectedRollouts: number;
}

export interface Sampled {
  /** The batch's groups in draw order: admitted fresh ones and replayed ones. */
  groups: Rollout[][];
  /** The rollouts of replayed groups (trained before, in an earlier step). */
  replayed: Set<Rollout>;
  /** Rollouts dropped as stale. */
  dropped: number;
  /** Per env name. */
  admission: Map<string, EnvAdmission>;
}

/** How far a replacement round draws ahead: 1 / the share of this step's fresh groups the gates
 * admitted, at most MAX_DRAW_AHEAD; 1 while none was rejected, and once a gate gave up (its bound). */
function drawAhead(admission: ReadonlyMap<string, EnvAdmission>): number {
  let admitted = 0;
  let rejected = 0;
  for (const count of admission.values()) {
    if (count.overBound > 0) return 1;
    admitted += count.admitted;
    rejected += count.rejected;
  }
  return rejected === 0 ? 1 : Math.min(MAX_DRAW_AHEAD, (admitted + rejected) / Math.max(1, admitted));
}

/**
 * Groups for step N totalling at least batch_size rollouts, none of them stale, each admitted by
 * its env's sampler: drawn (groups pending from the last step first, then a fresh task or a stored
 * group to replay), run all at once, then, in draw order, each fresh group's task statistics
 * recorded, the gate asked, the sampler told. A rejected group is replaced by drawing again.
 */
export async function sampleGroups(
  step: number,
  o: CollectContext,
  sampler: TaskSampler,
  progress: Progress,
): Promise<Sampled> {
  const minVersion = step - 1 - o.config.orchestrator.max_off_policy_steps;
  const out: Sampled = { groups: [], replayed: new Set(), dropped: 0, admission: new Map() };
  for (const env of o.envs)
    out.admission.set(env.resolved.name, { admitted: 0, rejected: 0, overBound: 0, replayed: 0, rejectedRollouts: 0 });
  const inBatch = new Set<Rollout>();
  let need = o.config.orchestrator.batch_size;
  while (need > 0) {
    const draws: Array<{ draw: Draw; ahead: boolean }> = [];
    const target = need * drawAhead(out.admission);
    for (let planned = 0; planned < target;) {
      const draw = sampler.next(step);
      draws.push({ draw, ahead: planned >= need });
      planned += draw.groupSize;
    }
    progress.grow(draws.reduce((n, { draw }) => n + (draw.kind === "fresh" ? draw.groupSize : 0), 0));
    const families = await Promise.all(
      draws.map(async ({ draw, ahead }) =>
        (draw.kind === "fresh" ? await runFamily(draw, o, progress) : [{ draw, group: draw.group }]).map((f) => ({
          ...f,
          ahead,
        })),
      ),
    );
    const keptGroups = new Set<string>();
    for (const { draw, ahead, group } of families.flat()) {
      const env = o.envs.find((e) => e.resolved.name === draw.env)!;
      const count = out.admission.get(draw.env)!;
      const parent = spawnedBy(group);
      if (parent && keptGroups.has(parent.group)) {
        sampler.keep({ group, replay: false }); // its spawning group waits for the next step: so does it
        continue;
      }
      if (parent && draw.kind !== "replay") {
        // what the spawned rollouts scored goes back to the trace that spawned them, trained or not
        const book = o.envs.find((e) => e.resolved.name === parent.env)!.barriers;
        for (const ready of await book.contribute(group, parent.rollout)) {
          for (const rollout of ready) inBatch.add(rollout);
          out.groups.push(ready);
        }
      }
      const versions = group.filter((r) => r.numTurns > 0 && r.trains !== false).map((r) => r.policyVersion);
      if (!env.frozen && versions.length > 0 && Math.min(...versions) < minVersion) {
        out.dropped += group.length;
        if (out.dropped >= o.config.orchestrator.max_empty_batches * o.config.orchestrator.batch_size) {
          throw new RlxError(
            `step ${step}: ${out.dropped} rollouts in a row were sampled by weights older than version ${minVersion} (max_off_policy_steps ${o.config.orchestrator.max_off_policy_steps}); the last by version ${Math.min(...versions)}`,
            {
              fix: "the policy is not serving the weights the trainer publishes: check the policy servers' logs (POST /update_weights)",
            },
          );
        }
        continue;
      }
      // a group that spawned, or was spawned, is admitted ungated: the spawning traces' rewards
      // wait on what they spawned, and what they spawned is their reward's evidence
      const spawning = group.some((r) => spawnOf(r));
      if (draw.kind === "fresh" && (parent || spawning)) {
        if (!spawning) env.stats.record(group, step);
        env.sampler.observe(group, true, step);
        count.admitted++;
      } else if (draw.kind === "fresh") {
        env.stats.record(group, step);
        const verdict = env.sampler.admit(group, count.rejectedRollouts);
        // past the bound a group is admitted only to fill this batch, never kept for the next
        const turnedAway = verdict === "reject" || (verdict === "over_bound" && ahead && need <= 0);
        env.sampler.observe(group, !turnedAway, step);
        if (turnedAway) {
          count.rejected++;
          count.rejectedRollouts += group.length;
          continue;
        }
        if (verdict === "over_bound") count.overBound++;
        else count.admitted++;
      }
      if (ahead && need <= 0) {
        sampler.keep({ group, replay: draw.kind === "replay" }); // drawn ahead, not needed: the next step's
        keptGroups.add(group[0]!.groupId);
        continue;
      }
      let trains = group;
      if (draw.kind === "replay") {
        // a replay trains again only the rollouts in no barrier set: a member trains once, when
        // its set is scored (barriers.ts, replayable)
        trains = env.barriers.replayable(group);
        // a group trains once per step: one stored in an earlier round (or kept pending from the
        // last step) may come back from its buffer while it is in this batch already
        if (trains.length === 0 || trains.some((rollout) => inBatch.has(rollout))) continue;
        count.replayed++;
        for (const rollout of trains) out.replayed.add(rollout);
      }
      if (!parent) need -= trains.length; // batch_size counts drawn groups: the spawned ride along
      // a fresh group's rollouts wait here on their algorithm's own barriers; what is released trains
      for (const ready of draw.kind === "replay" ? [trains] : await env.barriers.arrive(group, step)) {
        for (const rollout of ready) inBatch.add(rollout);
        out.groups.push(ready);
      }
    }
  }
  for (const env of o.envs) out.groups.push(...(await env.barriers.cut(step)));
  return out;
}

/** A fresh group, then the groups its traces spawned (and theirs), run once it has finished, while
 * the round's other groups still run. */
async function runFamily(
  draw: Draw & { kind: "fresh" },
  o: CollectContext,
  progress: Progress,
  by?: SpawnedBy,
): Promise<Array<{ draw: Draw; group: Rollout[] }>> {
  const group = await runGroup(draw, o, progress, by);
  const spawned = await Promise.all(
    group
      .filter((r) => spawnOf(r) && isTrainable(r))
      .map((rollout) => {
        const spawn = spawnOf(rollout)!;
        if (!o.envs.some((e) => e.resolved.name === spawn.env))
          throw new RlxError(
            `env ${rollout.env} spawned a group of "${spawn.env}", which is not a train env of this run`,
            {
              fix: `add [[orchestrator.train.env]] name = "${spawn.env}" (ratio = 0: drawn only when spawned), or set the spawning env's args to name one of ${o.envs.map((e) => `"${e.resolved.name}"`).join(", ")}`,
            },
          );
        progress.grow(spawn.size);
        const child: Draw & { kind: "fresh" } = {
          kind: "fresh",
          env: spawn.env,
          groupSize: spawn.size,
          task: spawn.task,
          groupId: spawnGroupId(rollout.id),
        };
        const by: SpawnedBy = { env: rollout.env, group: rollout.groupId, rollout: rollout.id };
        return runFamily(child, o, progress, by);
      }),
  );
  return [{ draw, group }, ...spawned.flat()];
}

/** One group: group_size rollouts of one task (a multi-agent env: group_size episodes, each giving a
 * rollout per trace), each scored by its role's algorithm as it finishes (a trace that spawned a
 * group: once its reward is settled, barriers.ts). The group barrier is the env's barrier book's. */
async function runGroup(
  draw: Draw & { kind: "fresh" },
  o: CollectContext,
  progress: Progress,
  by?: SpawnedBy,
): Promise<Rollout[]> {
  const train = o.envs.find((e) => e.resolved.name === draw.env)!;
  const env = train.resolved;
  const episodes = await Promise.all(
    Array.from({ length: draw.groupSize }, async (_, i) => {
      const id = `${draw.groupId}/r${i}`;
      const request = {
        id,
        groupId: draw.groupId,
        envId: env.name,
        task: draw.task,
        client: train.client,
        renderer: o.renderer,
        sampling: {
          maxTokens: env.max_tokens,
          temperature: env.temperature,
          topP: 1,
          topK: 0,
          seed: hashString(`${o.config.seed}:${id}`),
        },
        maxContextTokens: o.config.orchestrator.seq_len,
        contextLimit: env.context_limit,
        templateArgs: o.config.orchestrator.chat_template_kwargs,
        rewardGate: train.rewardGate,
      };
      const { episode } = train.env;
      const rollouts = episode
        ? await runEpisode({ ...request, env: { ...train.env, episode }, players: train.players ?? new Map() })
        : [await runRollout({ ...request, env: train.env })];
      for (const rollout of rollouts) {
        if (by) rollout.info.spawnedBy = by;
        if (spawnOf(rollout)) continue; // scored once its reward is settled
        await failAsData([rollout], "scoreRollout", () => finishRollout(algorithmOf(train, rollout), rollout));
      }
      progress.tick();
      return rollouts;
    }),
  );
  return episodes.flat();
}
