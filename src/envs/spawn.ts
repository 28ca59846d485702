// Where a rollout stands in a spawn (src/envs/types.ts, EpisodeResult.spawn): the group a trace
// asked the orchestrator to run, kept in `rollout.info.spawn`, and on every rollout of that group,
// who spawned it (`rollout.info.spawnedBy`). The orchestrator runs and settles spawns
// (src/orchestrator/groups.ts, barriers.ts); audit records name both ends (src/rundir/audit.ts).
import type { Rollout } from "../data/types.ts";
import type { SpawnRequest } from "./types.ts";

/** The trace that spawned a group: its env, its group and its rollout id. */
export interface SpawnedBy {
  env: string;
  group: string;
  rollout: string;
}

/** The group a trace spawned, if it did. */
export const spawnOf = (rollout: Rollout) => rollout.info.spawn as SpawnRequest | undefined;

/** The id of the group a trace spawned. */
export const spawnGroupId = (rolloutId: string) => `${rolloutId}/spawn`;

/** Who spawned a group (read from its first rollout), if anyone did. */
export const spawnedBy = (group: readonly Rollout[]) => group[0]?.info.spawnedBy as SpawnedBy | undefined;
