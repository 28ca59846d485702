// A step's rl loss table (PackedStep.losses, docs/architecture.md §6): the distinct resolved losses
// of the train envs, in the order of the first env naming each, and each env's index into it (its
// samples' code, which packStep writes into a row's sampleLosses). Envs with no rl loss (a built-in
// whose action tokens go to another component) get code 0: they have no rl tokens to read it. A run
// whose envs all train with one loss has a table of one entry and every code 0, so its rows are
// the rows it wrote before per-env losses. The table is the same every step (it depends on the
// config only).
import type { ResolvedConfig } from "../config/resolve.ts";
import { runLoss } from "../algorithms/loss_schema.ts";
import type { RlLoss } from "../data/loss_types.ts";

export interface LossTable {
  losses: RlLoss[];
  /** Env name -> index into losses. */
  codes: Map<string, number>;
}

/** An RlLoss as a key: its settings in one order, whatever order its object has them in. */
const lossKey = (loss: RlLoss) => JSON.stringify(Object.entries(loss).sort(([a], [b]) => (a < b ? -1 : 1)));

export function lossTable(config: ResolvedConfig): LossTable {
  const losses: RlLoss[] = [];
  const index = new Map<string, number>();
  const codes = new Map<string, number>();
  for (const env of config.orchestrator.train.env) {
    if (!env.loss) {
      codes.set(env.name, 0);
      continue;
    }
    const key = lossKey(env.loss);
    if (!index.has(key)) (index.set(key, losses.length), losses.push(env.loss));
    codes.set(env.name, index.get(key)!);
  }
  // no rl env: the table still has an entry, the run's, so a code 0 always names a loss
  if (losses.length === 0) losses.push(runLoss(config));
  return { losses, codes };
}
