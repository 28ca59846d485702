// The rollout viewer's data: a run's audit records (rollouts/step_N.jsonl, src/rundir/audit.ts)
// in a compact form, and the text of every token they use, decoded with the run's tokenizer
// (model.path of its config.resolved.toml). A long run's records are thinned to evenly spaced
// steps (the last always kept) so the page stays a few megabytes.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { Tokenizer } from "../model/tokenizer.ts";
import { type AuditRecord, parseAudit } from "../rundir/audit.ts";

/** Audit JSON read per run at most (bytes); beyond it, steps are skipped evenly. */
const AUDIT_BUDGET = 12_000_000;

/** One trained sample as the page gets it; weight streams absent = the trainer's defaults. */
export interface PageSample {
  step: number;
  env: string;
  algo: string;
  group: string;
  /** rollout_id and sample_index: which audit record this is. */
  rollout: string;
  index: number;
  task: string;
  reward: number;
  advantage: number | null;
  replayed?: boolean;
  ids: number[];
  mask: number[];
  adv: number[];
  rl?: number[];
  ce?: number[];
  kl?: number[];
  distill?: number[];
}

export interface RunSamples {
  samples: PageSample[];
  /** Token id -> its text. */
  vocab: Record<number, string>;
  /** Steps with audit records, and those the page holds. */
  steps: { audited: number; shown: number };
  /** Why token text is missing (ids are shown instead), if it is. */
  note?: string;
}

const round = (values: number[]) => values.map((v) => Number(v.toPrecision(4)));

function pageSample(r: AuditRecord): PageSample {
  const sample: PageSample = {
    step: r.step,
    env: r.env,
    algo: r.algo,
    group: r.group_id,
    rollout: r.rollout_id,
    index: r.sample_index,
    task: r.task_id,
    reward: r.reward,
    advantage: r.advantage,
    ids: r.token_ids,
    mask: r.loss_mask,
    adv: round(r.advantages),
  };
  if (r.replayed) sample.replayed = true;
  if (r.rl_weights) sample.rl = round(r.rl_weights);
  if (r.ce_weights) sample.ce = round(r.ce_weights);
  if (r.ref_kl_weights) sample.kl = round(r.ref_kl_weights);
  if (r.distill_weights) sample.distill = round(r.distill_weights);
  return sample;
}

/** The run's tokenizer, from its resolved config's model.path; undefined with the reason. */
function runTokenizer(runDir: string): { tokenizer?: Tokenizer; note?: string } {
  const configPath = join(runDir, "config.resolved.toml");
  if (!existsSync(configPath)) return { note: `no config.resolved.toml in ${runDir}: token ids shown` };
  const model = (parseToml(readFileSync(configPath, "utf8")) as { model?: { path?: string } }).model?.path;
  if (!model) return { note: "config.resolved.toml has no model.path: token ids shown" };
  const candidates = isAbsolute(model) ? [model] : [resolve(model), resolve(runDir, "..", "..", model)];
  for (const dir of candidates) {
    if (!existsSync(join(dir, "tokenizer.json"))) continue;
    try {
      return { tokenizer: Tokenizer.load(dir) };
    } catch (err) {
      return { note: `the tokenizer of ${dir} did not load (${(err as Error).message}): token ids shown` };
    }
  }
  return { note: `the model ${model} is not here (run the report where the run ran): token ids shown` };
}

export function readSamples(runDir: string): RunSamples {
  const dir = join(runDir, "rollouts");
  const files = existsSync(dir)
    ? readdirSync(dir)
        .map((name) => ({ name, step: Number(/^step_(\d+)\.jsonl$/.exec(name)?.[1] ?? Number.NaN) }))
        .filter((f) => Number.isInteger(f.step))
        .sort((a, b) => a.step - b.step)
    : [];
  const bytes = files.reduce((n, f) => n + statSync(join(dir, f.name)).size, 0);
  const stride = Math.max(1, Math.ceil(bytes / AUDIT_BUDGET));
  const kept = files.filter((_, i) => i % stride === 0 || i === files.length - 1);
  const samples = kept.flatMap((f) => parseAudit(readFileSync(join(dir, f.name), "utf8")).map(pageSample));
  const { tokenizer, note } = samples.length ? runTokenizer(runDir) : {};
  const vocab: Record<number, string> = {};
  if (tokenizer)
    for (const s of samples) for (const id of s.ids) if (!(id in vocab)) vocab[id] = tokenizer.decode([id]);
  return { samples, vocab, steps: { audited: files.length, shown: kept.length }, ...(note ? { note } : {}) };
}
