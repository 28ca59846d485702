// `[hub]` in a run (src/orchestrator/hub_sync.ts) against the local Hub stand-in
// (test/fixtures/mock_hub.ts): steps due by the interval, and the last, go up one commit each and
// the repo ends holding the last step byte for byte; a Hub that refuses leaves the run going, with
// a warning that names the staged copy to push again; a missing token stops the run before step 1.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { filesToPush } from "../../src/hub/push.ts";
import { startMockHub } from "../fixtures/mock_hub.ts";
import { rlx, type Workspace, workspace, writeConfig } from "./train_helpers.ts";

const TOKEN = "hf_mock_write_token";
let ws: Workspace;
beforeAll(async () => {
  ws = await workspace();
});
const stops: Array<() => void> = [];
afterAll(() => stops.forEach((stop) => stop()));

const hubRun = (name: string, hubUrl: string, tokenVar = "HF_TOKEN") =>
  writeConfig(
    ws,
    name,
    `max_steps = 3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 256
max_tokens = 12
[hub]
repo = "me/run"
interval = 2
url = "${hubUrl}"
token_var = "${tokenVar}"
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`,
  );

test("steps 2 and 3 (the interval's and the last) go up one commit each; the repo holds step 3", async () => {
  const hub = startMockHub({ token: TOKEN });
  stops.push(() => hub.stop());
  const { path, runDir } = hubRun("pushes", hub.url);
  const { code, out, err } = await rlx(["train", path], undefined, { HF_TOKEN: TOKEN }).done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  expect(out).toMatch(/hub: step 2 pushed to http:\/\/127\.0\.0\.1:\d+\/me\/run/);
  expect(out).toMatch(/hub: step 3 pushed to/);
  expect(out.indexOf("hub: step 2 pushed")).toBeLessThan(out.indexOf("hub: step 3 pushed"));
  expect(hub.calls.filter((c) => c === "POST /api/models/me/run/commit/main")).toHaveLength(2);
  const last = join(runDir, "weights", "step_3");
  const remote = hub.repos.get("me/run")!;
  const local = filesToPush(last);
  expect([...remote.keys()].sort()).toEqual(local.map((f) => f.path).sort());
  for (const f of local) expect(Buffer.from(remote.get(f.path)!)).toEqual(readFileSync(join(last, f.path)));
  expect(existsSync(join(runDir, "hub", "step_3"))).toBe(false); // the staged copy is gone once pushed
}, 180_000);

test("a Hub that refuses is a warning: the run finishes, and the staged step waits for rlx push", async () => {
  const hub = startMockHub({ token: TOKEN, refuse: { route: /commit/, status: 500 } });
  stops.push(() => hub.stop());
  const { path, runDir } = hubRun("refused", hub.url);
  const { code, err } = await rlx(["train", path], undefined, { HF_TOKEN: TOKEN }).done;
  expect(code).toBe(0);
  expect(err).toContain("hub: pushing step 3 to me/run failed, the run goes on");
  const staged = join(runDir, "hub", "step_3");
  expect(err).toContain(`retry: rlx push ${staged} --repo me/run`);
  expect(filesToPush(staged).map((f) => f.path)).toEqual(
    filesToPush(join(runDir, "weights", "step_3")).map((f) => f.path),
  );
}, 180_000);

test("[hub] without its token stops the run before any step", async () => {
  const { path, runDir } = hubRun("no-token", "http://127.0.0.1:9", "RLX_TEST_NO_SUCH_TOKEN");
  const { code, err } = await rlx(["train", path]).done;
  expect(code).toBe(1);
  expect(err).toContain("hub.repo is set but $RLX_TEST_NO_SUCH_TOKEN is not");
  expect(existsSync(join(runDir, "weights", "step_1"))).toBe(false);
}, 120_000);
