// `rlx replay RUN --step N --rollouts` (docs/run-directory.md, "Replaying a step"): the rollouts a
// step trained, regenerated after the fact and compared token by token with what the run recorded.
// The step's audit records (rollouts/step_N.jsonl) name each trained sample's rollout and hold its
// tokens and sampling logprobs; the policy engines' schedule records (RUN/schedule/) hold every
// request each engine ran, tagged with its rollout, and every call that decided its arithmetic.
// Each record holding the step's requests is replayed (schedule_replay.ts) up to the last of them
// and each request's tokens and logprobs are compared, bit for bit, with the positions of its
// sample that followed its prompt. The first that differs is reported with the weights version
// that sampled it: a damaged published weight shows at the first token it sampled.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { RlxError } from "../errors.ts";
import { auditPath, scheduleDir } from "../rundir/paths.ts";
import { readSchedule, replaySchedule, type ReplayedRequest, type ScheduleFile } from "./schedule_replay.ts";

interface AuditSample {
  rollout_id: string;
  sample_index: number;
  algo: string;
  token_ids: number[];
  inference_logprobs: number[];
}

export interface TokenDifference {
  rollout_id: string;
  sample_index: number;
  /** Index into the sample's token_ids. */
  position: number;
  /** The weights version the replay sampled this token with. */
  version: number;
  recorded: { token: number | null; logprob: number | null };
  replayed: { token: number | null; logprob: number | null };
}

export interface RolloutReplay {
  run: string;
  step: number;
  samples: number;
  requests: number;
  tokens: number;
  /** The schedule records replayed and how many of their events. */
  records: { path: string; events: number; of: number }[];
  /** Weights versions that sampled the step's tokens. */
  versions: number[];
  /** Where in each sample a weights version began sampling: the first token of each request, and
   * each in-flight swap inside one. */
  versionStarts: { rollout_id: string; sample_index: number; position: number; version: number }[];
  /** Rollouts of sampled (non-sft) samples that no schedule record holds. */
  unmatched: string[];
  first?: TokenDifference;
  seconds: number;
}

const matches = (tag: string | undefined, rollout: string) =>
  tag !== undefined && (tag === rollout || tag.startsWith(`${rollout}#`));

function readAudit(runDir: string, step: number): AuditSample[] {
  const path = auditPath(runDir, step);
  if (!existsSync(path))
    throw new RlxError(`${path} is missing: replaying step ${step}'s rollouts compares with its audit records`, {
      fix: "run with log.rollouts_interval = 1 (or a divisor of the step)",
    });
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as AuditSample);
}

/** Per record: the line after the last request of `rollouts` it finished (0: none). */
function linesNeeded(file: ScheduleFile, rollouts: Set<string>): { until: number; held: Set<string> } {
  const tags = new Map<number, string>();
  const held = new Set<string>();
  let until = 0;
  file.events.forEach((event, at) => {
    if ("a" in event) for (const entry of event.a) if ("p" in entry && entry.tag) tags.set(entry.i, entry.tag);
    if (!("f" in event)) return;
    const tag = tags.get(event.f);
    const rollout = tag === undefined ? undefined : [...rollouts].find((r) => matches(tag, r));
    if (rollout === undefined) return;
    held.add(rollout);
    until = at + 1;
  });
  return { until, held };
}

function compareRequest(
  request: ReplayedRequest,
  sample: AuditSample,
): { compared: number; difference?: TokenDifference } {
  const from = request.prompt.length;
  const recorded = request.recordedLength ?? 0;
  const length = Math.max(recorded, request.tokens.length);
  for (let j = 0; j < length; j++) {
    const at = from + j;
    const token = j < recorded ? (sample.token_ids[at] ?? null) : null;
    const logprob = j < recorded ? (sample.inference_logprobs[at] ?? null) : null;
    const again = request.tokens[j] ?? null;
    const againLogprob = request.logprobs[j] ?? null;
    const same = token === again && logprob !== null && againLogprob !== null && Math.fround(logprob) === againLogprob;
    if (!same)
      return {
        compared: j,
        difference: {
          rollout_id: sample.rollout_id,
          sample_index: sample.sample_index,
          position: at,
          version: request.versions[j] ?? request.versions.at(-1) ?? -1,
          recorded: { token, logprob },
          replayed: { token: again, logprob: againLogprob },
        },
      };
  }
  return { compared: length };
}

export async function replayRollouts(
  run: string,
  step: number,
  log: (line: string) => void = () => {},
): Promise<RolloutReplay> {
  const runDir = resolve(run);
  const started = performance.now();
  const samples = readAudit(runDir, step);
  const rollouts = new Set(samples.map((s) => s.rollout_id));
  const dir = scheduleDir(runDir);
  const names = existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".jsonl")) : [];
  if (names.length === 0)
    throw new RlxError(`${dir} holds no schedule record: the run's policy engines recorded nothing`, {
      fix: "run with inference.record_schedule = true (the default) and the policy spawned or in-process",
    });
  // the newest record holding a rollout wins (after a resume, a rollout regenerated anew)
  const files = names
    .map((name) => readSchedule(join(dir, name)))
    .sort((a, b) => b.header.started.localeCompare(a.header.started));
  const claimed = new Set<string>();
  const chosen: { file: ScheduleFile; until: number; rollouts: Set<string> }[] = [];
  for (const file of files) {
    const { until, held } = linesNeeded(file, new Set([...rollouts].filter((r) => !claimed.has(r))));
    if (until === 0) continue;
    for (const r of held) claimed.add(r);
    chosen.push({ file, until, rollouts: held });
  }
  const result: RolloutReplay = {
    run: runDir,
    step,
    samples: samples.length,
    requests: 0,
    tokens: 0,
    records: [],
    versions: [],
    versionStarts: [],
    unmatched: [
      ...new Set(samples.filter((s) => s.algo !== "sft" && !claimed.has(s.rollout_id)).map((s) => s.rollout_id)),
    ],
    seconds: 0,
  };
  const versions = new Set<number>();
  let firstAt: [number, number] | undefined; // the first difference's sample (in the audit's order) and position
  for (const { file, until, rollouts: held } of chosen) {
    log(`replay: ${file.path}: ${until} of ${file.events.length} events (${held.size} rollouts of step ${step})`);
    const replayed = await replaySchedule(file, runDir, until);
    result.records.push({ path: file.path, events: until, of: file.events.length });
    for (const request of replayed.values()) {
      const rollout = [...held].find((r) => matches(request.tag, r));
      if (rollout === undefined || request.recordedLength === undefined) continue;
      const sample = samples.find(
        (s) => s.rollout_id === rollout && request.prompt.every((token, k) => s.token_ids[k] === token),
      );
      if (!sample) continue; // a turn of the rollout that no trained sample holds
      result.requests++;
      request.versions.forEach((version, j) => {
        versions.add(version);
        if (j === 0 || request.versions[j - 1] !== version) {
          const { rollout_id, sample_index } = sample;
          result.versionStarts.push({ rollout_id, sample_index, position: request.prompt.length + j, version });
        }
      });
      const { compared, difference } = compareRequest(request, sample);
      result.tokens += compared;
      const order = samples.indexOf(sample);
      if (
        difference &&
        (!firstAt || order < firstAt[0] || (order === firstAt[0] && difference.position < firstAt[1]))
      ) {
        result.first = difference;
        firstAt = [order, difference.position];
      }
    }
  }
  result.versions = [...versions].sort((a, b) => a - b);
  result.seconds = (performance.now() - started) / 1000;
  return result;
}
