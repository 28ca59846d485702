// The schedule record (src/engine/schedule.ts) and its replay (src/replay/schedule_replay.ts) on a
// real micro model: an engine whose requests arrive while others decode, one cancelled, one
// ended by its consumer (a stop string), prompts sharing a prefix (prefix caching on), and an
// in-flight swap to other weights mid-sequence; replaying the record gives back every request's
// tokens, logprobs and per-token weights versions exactly. A record cut mid-line (a killed
// process) replays up to its last whole line.
import { beforeAll, expect, test } from "bun:test";
import { appendFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../../../src/engine/engine.ts";
import type { EngineResult } from "../../../src/engine/engine_api.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { readSchedule, replaySchedule } from "../../../src/replay/schedule_replay.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

let dirA: string;
let dirB: string;
let runDir: string;

beforeAll(async () => {
  dirA = await microModelDir({ seed: 1 });
  dirB = await microModelDir({ seed: 2 });
  runDir = mkdtempSync(join(tmpdir(), "rlx-schedule-"));
});

const prompt = (i: number) => [5, 9, 13, 17, 21, 1 + (i % 7), 3 + i];
const sampling = (maxNewTokens: number, seed: number) => ({ temperature: 1, maxNewTokens, seed });

test("a recorded engine replays every token, logprob and version exactly", async () => {
  const path = join(runDir, "schedule", "policy-0-1.jsonl");
  const engine = new Engine(await loadModel(dirA), {
    maxBatch: 5,
    maxModelLen: 128,
    reloadMode: "in-flight",
    schedule: { path, model: dirA },
  });
  const results = new Map<string, Promise<EngineResult>>();
  const submit = (tag: string, i: number, tokens: number, extra: object = {}) =>
    results.set(tag, engine.submit({ prompt: prompt(i), sampling: sampling(tokens, 100 + i), tag, ...extra }));
  let first = 0;
  submit("long", 0, 90, { onToken: () => void first++ });
  submit("a", 1, 20);
  while (first < 4) await Bun.sleep(1);
  submit("b", 2, 30); // joins the long one's batches
  const cancel = new AbortController();
  let cancelled = 0;
  submit("cancelled", 3, 50, { signal: cancel.signal, onToken: () => void (++cancelled === 5 && cancel.abort()) });
  let stopped = 0;
  submit("stopped", 4, 50, { onToken: () => ++stopped === 7 });
  submit("c", 5, 25); // waits for a slot
  const a = await results.get("a")!;
  // a's next turn continues the K/V its slot kept (a swap drops kept prefixes: it comes after)
  const next = [...prompt(1), ...a.tokens, 11];
  let afterTokens = 0;
  const onToken = () => void afterTokens++;
  results.set("after", engine.submit({ prompt: next, sampling: sampling(15, 7), tag: "after", onToken }));
  while (afterTokens < 2) await Bun.sleep(1);
  await engine.reloadWeights(dirB, 1);
  const recorded = new Map<string, EngineResult>();
  for (const [tag, result] of results) recorded.set(tag, await result);
  const reused = engine.cacheStats.reusedTokens;
  await engine.close();

  expect(reused).toBeGreaterThan(0);
  expect(recorded.get("long")!.version).toBe(0);
  expect(recorded.get("long")!.versionEnd).toBe(1); // the swap landed mid-sequence
  expect(recorded.get("cancelled")!.finish).toBe("abort");
  expect(recorded.get("stopped")!.tokens.length).toBe(7);

  const file = readSchedule(path);
  const replayed = [...(await replaySchedule(file, runDir)).values()];
  expect(replayed.map((r) => r.tag).sort()).toEqual([...recorded.keys()].sort());
  for (const r of replayed) {
    const want = recorded.get(r.tag!)!;
    expect(r.tokens).toEqual(want.tokens);
    expect(r.logprobs).toEqual(want.logprobs);
    expect(r.recordedLength).toBe(want.tokens.length);
    expect([r.versions[0], r.versions.at(-1)]).toEqual([want.version, want.versionEnd]);
  }
  const swapped = replayed.find((r) => r.tag === "long")!.versions;
  expect(new Set(swapped)).toEqual(new Set([0, 1]));

  // a line cut short by a kill is left out; what came before it replays
  const lines = readFileSync(path, "utf8").split("\n").length - 1;
  appendFileSync(path, '{"a":[{"i":99,"p":[1,2');
  const torn = readSchedule(path);
  expect(torn.events.length).toBe(lines - 1);
  expect((await replaySchedule(torn, runDir)).get(0)!.tokens).toEqual(replayed.find((r) => r.id === 0)!.tokens);
});
