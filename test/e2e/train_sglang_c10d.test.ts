// inference.weight_transfer = "c10d" with SGLang as the engine (docs/engines.md, "Weights in
// memory"), against a stand-in SGLang in its own process (test/fixtures/sglang_c10d.ts) that
// speaks SGLang's update routes and joins the update group as torch 2's Python code would:
//   - a 3-step `rlx train` has the server join its group once, then every step reaches it by
//     broadcast, in the order the request names the tensors, and the stand-in finds the names,
//     shapes, dtype and bytes equal to the step's published weights; rollouts carry those versions;
//   - a server that refuses the join or an update stops the run with its URL, route and message;
//     one that dies mid-update stops it naming the server.
// Not tested: a real SGLang (no GPU, no PyPI here); see docs/engines.md.
import { afterAll, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { readAudit, rlx, ROOT, sharedWorkspace, writeConfig } from "./train_helpers.ts";

const ws = sharedWorkspace();
const standins: Subprocess[] = [];

afterAll(() => {
  for (const p of standins) p.kill();
});

/** Starts the stand-in for run `runDir`; resolves with its base URL and its log's path. */
async function startStandin(runDir: string, name: string, extra: string[] = []) {
  const logPath = join(ws.dir, `${name}.calls.jsonl`);
  const proc = Bun.spawn(
    [process.execPath, join(ROOT, "test/fixtures/sglang_c10d.ts"), ws.model, runDir, logPath, ...extra],
    { stdout: "pipe", stderr: "inherit" },
  );
  standins.push(proc);
  const reader = proc.stdout.getReader();
  let text = "";
  while (!/url (\S+)\n/.test(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stand-in exited before it served: ${text}`);
    text += new TextDecoder().decode(value);
  }
  return { url: /url (\S+)\n/.exec(text)![1]!, logPath };
}

const calls = (logPath: string) =>
  existsSync(logPath)
    ? readFileSync(logPath, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, unknown>)
    : [];

const config = (url: string) => `max_steps = 3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 256
max_tokens = 12
[inference]
engine = "sglang"
base_urls = ["${url}"]
weight_transfer = "c10d"
publish_every = 1
transfer_timeout_s = 60
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`;

for (const [dtype, torchDtype] of [
  ["f32", "float32"],
  ["bf16", "bfloat16"],
]) {
  test(`every step reaches SGLang by broadcast over its update group as ${torchDtype}, names, shapes, dtype and bytes checked`, async () => {
    const name = `sglang-c10d-${dtype}`;
    const runDir = join(ws.dir, name);
    const { url, logPath } = await startStandin(runDir, name);
    const { path } = writeConfig(ws, name, config(url));
    const { code, err } = await rlx(["train", path, "--set", `model.dtype=${dtype}`]).done;
    expect(err).not.toContain("error:");
    expect(code).toBe(0);

    const log = calls(logPath);
    const init = log.filter((c) => c.route === "/init_weights_update_group");
    expect(init).toHaveLength(1);
    const plan = JSON.parse(readFileSync(join(runDir, "weight_channels.json"), "utf8"));
    expect(init[0]!.body).toEqual({
      master_address: "127.0.0.1",
      master_port: plan.ports[0],
      rank_offset: 1,
      world_size: 2,
      group_name: "rlx-weights-0",
      backend: "gloo",
    });
    const updates = log.filter((c) => c.route === "/update_weights_from_distributed");
    expect(updates.map((u) => u.version)).toEqual(["1", "2", "3"]);
    const manifest = JSON.parse(readFileSync(join(runDir, "weight_manifest.json"), "utf8"));
    for (const u of updates) {
      expect(u.errors).toEqual([]);
      expect(u.group).toBe("rlx-weights-0");
      expect(u.flush_cache).toBe(true);
      expect(u.count).toBe(manifest.names.length);
      expect(u.bytes as number).toBeGreaterThan(0);
    }
    expect(new Set(manifest.dtypes)).toEqual(new Set([torchDtype]));
    for (const [step, records] of readAudit(runDir))
      for (const r of records) expect(r.policy_version).toBeLessThanOrEqual(step - 1);
  }, 240_000);
}

for (const [flag, route] of [
  ["--refuse", "/update_weights_from_distributed"],
  ["--refuse-init", "/init_weights_update_group"],
] as const)
  test(`a server that refuses ${route} stops the run, naming the server, the route and its message`, async () => {
    const name = `sglang${flag}`;
    const runDir = join(ws.dir, name);
    const { url } = await startStandin(runDir, name, [flag]);
    const { path } = writeConfig(ws, name, config(url));
    const { code, err } = await rlx(["train", path]).done;
    expect(code).not.toBe(0);
    expect(err).toContain(`${url.replace(/\/v1$/, "")}${route}`);
    expect(err).toContain("refused by the stand-in");
  }, 240_000);

test("a server that dies mid-update stops the run, naming it", async () => {
  const runDir = join(ws.dir, "sglang-die");
  const { url } = await startStandin(runDir, "sglang-die", ["--die"]);
  const { path } = writeConfig(ws, "sglang-die", config(url));
  const { code, err } = await rlx(["train", path]).done;
  expect(code).not.toBe(0);
  expect(err).toContain(url.replace(/\/v1$/, ""));
}, 240_000);
