// rlx push against a local server answering the Hub's upload routes (test/fixtures/mock_hub.ts):
// a model directory from `rlx init` goes up byte for byte in one commit (the weights through the
// LFS route, rlx's publish marker left out), a second push commits to the existing repo, and a
// refused push (bad token, a failing LFS store), a damaged weight file or a missing token stop
// with a clear error and leave the directory as it was.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { initModel } from "../../src/model/presets.ts";
import { filesToPush } from "../../src/hub/push.ts";
import { startMockHub } from "../fixtures/mock_hub.ts";
import { rlx } from "./train_helpers.ts";

const TOKEN = "hf_mock_write_token";
const tmp = mkdtempSync(join(tmpdir(), "rlx-push-"));
const model = join(tmp, "model");
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
beforeAll(async () => {
  await initModel({ preset: "tiny", out: model, seed: 0, dtype: "f32" });
  writeFileSync(join(model, "published.json"), "{}"); // as in a run's weights/step_N
});

const snapshot = () => new Map(filesToPush(model).map((f) => [f.path, readFileSync(join(model, f.path))]));
const push = (hubUrl: string, extra: string[] = [], env: Record<string, string> = { HF_TOKEN: TOKEN }) =>
  rlx(["push", model, "--repo", "me/tiny-rl", "--hub-url", hubUrl, ...extra], undefined, env).done;

test("a model directory goes up byte for byte, weights through LFS; a second push commits to the same repo", async () => {
  const hub = startMockHub({ token: TOKEN });
  try {
    const first = await push(hub.url, ["--json"]);
    expect(first.err).not.toContain("error");
    expect(first.code).toBe(0);
    const result = JSON.parse(first.out) as { created: boolean; files: Array<{ path: string }>; commit: string };
    expect(result.created).toBe(true);
    const local = snapshot();
    expect([...local.keys()]).not.toContain("published.json");
    const remote = hub.repos.get("me/tiny-rl")!;
    expect([...remote.keys()].sort()).toEqual([...local.keys()].sort());
    for (const [path, bytes] of local) expect(Buffer.from(remote.get(path)!)).toEqual(bytes);
    expect(hub.lfsPaths.get("me/tiny-rl")).toEqual(["model.safetensors"]); // 1 MiB and up: LFS, as the Hub does
    expect(first.err).toContain("push: uploadingLargeFiles");
    expect(first.err).toContain("push: uploading model.safetensors done");

    const second = await push(hub.url, ["--message", "step 2"]);
    expect(second.code).toBe(0);
    expect(second.out).toMatch(
      /^pushed \d+ files \([\d.]+ MiB\) to http:\/\/127\.0\.0\.1:\d+\/me\/tiny-rl in [\d.]+ s; commit [0-9a-f]{40}\n$/,
    );
    expect(second.out).not.toContain("(created)");
    expect(hub.calls.filter((c) => c === "POST /api/repos/create")).toHaveLength(2); // the second answered 409
  } finally {
    hub.stop();
  }
}, 60_000);

test("a refused push names the route, status and fix, and leaves the directory as it was", async () => {
  const before = snapshot();
  const badToken = startMockHub({ token: "another-token" });
  try {
    const run = await push(badToken.url);
    expect(run.code).toBe(1);
    expect(run.err).toContain(`${badToken.url}/api/repos/create: 401: Invalid credentials in Authorization header`);
    expect(run.err).toContain(
      "fix: check the token ($HF_TOKEN or --token-var): it must have write access to me/tiny-rl",
    );
  } finally {
    badToken.stop();
  }
  const lfsDown = startMockHub({ token: TOKEN, refuse: { route: /^PUT \/lfs-upload\//, status: 503 } });
  try {
    const run = await push(lfsDown.url);
    expect(run.code).toBe(1);
    expect(run.err).toContain(": 503: refused by the mock hub");
    expect(run.err).toContain("fix: nothing was changed locally; run the same command again to retry");
    expect(lfsDown.repos.get("me/tiny-rl")!.size).toBe(0); // no commit was made
  } finally {
    lfsDown.stop();
  }
  expect(snapshot()).toEqual(before);
}, 60_000);

test("a damaged weight file or a missing token is refused before any request", async () => {
  const hub = startMockHub({ token: TOKEN });
  try {
    const noToken = await push(hub.url, [], { HF_TOKEN: "" });
    expect(noToken.code).toBe(1);
    expect(noToken.err).toContain("$HF_TOKEN is not set: pushing needs a Hub token with write access");
    const weights = join(model, "model.safetensors");
    const original = readFileSync(weights);
    const damaged = Buffer.from(original);
    damaged[damaged.length - 1]! ^= 0xff;
    writeFileSync(weights, damaged);
    try {
      const run = await push(hub.url);
      expect(run.code).toBe(1);
      expect(run.err).toContain(`the model directory ${model} is damaged: model.safetensors`);
    } finally {
      writeFileSync(weights, original);
    }
    expect(hub.calls).toEqual([]);
  } finally {
    hub.stop();
  }
}, 60_000);

test("a LoRA adapter directory (PEFT layout) pushes like a model directory", async () => {
  const adapterDir = join(tmp, "adapter");
  const { loadModel, saveModel } = await import("../../src/model/hf.ts");
  {
    using base = await loadModel(model);
    base.addLora({ rank: 2, alpha: 4, dropout: 0, targets: ["q_proj", "v_proj"] });
    saveModel(base, adapterDir, { dtype: "f32", sourceDir: model });
  }
  const hub = startMockHub({ token: TOKEN });
  try {
    const run = await rlx(["push", adapterDir, "--repo", "me/tiny-lora", "--hub-url", hub.url], undefined, {
      HF_TOKEN: TOKEN,
    }).done;
    expect(run.code).toBe(0);
    const remote = hub.repos.get("me/tiny-lora")!;
    expect([...remote.keys()]).toContain("adapter_model.safetensors");
    expect([...remote.keys()]).toContain("adapter_config.json");
    expect(Buffer.from(remote.get("adapter_config.json")!)).toEqual(
      readFileSync(join(adapterDir, "adapter_config.json")),
    );
  } finally {
    hub.stop();
  }
}, 60_000);
