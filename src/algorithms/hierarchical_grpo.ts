// Hierarchical GRPO for proposer-solver envs (prime-rl's algo/hierarchical_grpo.py): a group of
// groups. A group draws group_size episodes of one seed task; each episode holds one proposer
// trace and a panel of solver traces that attempt the proposer's task. Credit is centered within
// comparison sets:
//
//   roles in `episode_roles` (default: solver)   A = r - mean(r) over the same role in the same
//                                                episode (the attempts at one proposed task)
//   every other role (the proposer)              A = r - mean(r) over that role in the whole group
//                                                (the proposals made from one seed task)
//
// so solver credit never compares attempts at problems of different difficulty, and proposer
// credit compares proposals with each other, never with solvers. A set of one trace gets A = 0.
//
// `proposer_peers = N` widens the proposers' set beyond one group: a barrier (byTask) holds each
// proposer trace until N proposals of its seed task have finished, across groups and steps, each
// with its own solver panel, and centers them together (a group of groups); the solvers train at
// once. 0 (the default, as prime-rl) compares the proposals of one group.
// The proposer's reward is a function of its own solvers' results (the env computes it when the
// episode ends), so its credit waits on its solver panel, and the group barrier waits on every
// episode's panel.
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { Algorithm, type LossComponent } from "./base.ts";
import { type BarrierSpec, byTask } from "./barriers.ts";
import { centered } from "./group.ts";
import { assignAdvantage } from "./routing.ts";
import { samplingSchema } from "./schemas.ts";

const schema = z.strictObject({
  type: z.literal("hierarchical_grpo"),
  sampling: samplingSchema,
  /** Roles compared within one episode; the other roles are compared across the group. */
  episode_roles: z.array(z.string()).default(["solver"]),
  /** Proposals of one seed task compared together across groups and steps (a barrier); 0 = within the group. */
  proposer_peers: z.number().int().min(0).default(0),
  /** Steps a proposer waits for its peers before its set times out (dropped). */
  proposer_timeout_steps: z.number().int().min(0).default(4),
});

export class HierarchicalGrpo extends Algorithm<z.infer<typeof schema>> {
  static override type = "hierarchical_grpo";
  static override actionLossType: LossComponent = "rl";
  static override groupRelative = true;
  static override schema = schema;

  /** A proposer (a role compared across episodes) waits for its peers when proposer_peers > 0. */
  private waitsForPeers(rollout: Rollout): boolean {
    return this.config.proposer_peers > 0 && !this.config.episode_roles.includes(rollout.role ?? "");
  }

  override barriers(): BarrierSpec[] {
    if (this.config.proposer_peers === 0) return [];
    const peers = byTask("proposer_peers", this.config.proposer_peers, {
      timeoutSteps: this.config.proposer_timeout_steps,
    });
    return [{ ...peers, member: (r) => (this.waitsForPeers(r) ? peers.member(r) : undefined) }];
  }

  override async scoreBarrier(_name: string, members: Rollout[]): Promise<void> {
    const advantages = centered(members.map((r) => r.reward));
    members.forEach((rollout, i) => assignAdvantage(rollout, advantages[i]!));
  }

  override async scoreGroup(group: Rollout[]): Promise<void> {
    const peers = new Map<string, Rollout[]>();
    for (const rollout of group) {
      if (this.waitsForPeers(rollout)) continue; // scored by its barrier
      const role = rollout.role ?? "";
      const inEpisode = this.config.episode_roles.includes(role);
      const key = JSON.stringify([role, inEpisode ? (rollout.info.episode ?? rollout.id) : null]);
      peers.set(key, [...(peers.get(key) ?? []), rollout]);
    }
    for (const members of peers.values()) {
      const advantages = centered(members.map((r) => r.reward));
      members.forEach((rollout, i) => assignAdvantage(rollout, advantages[i]!));
    }
  }
}
