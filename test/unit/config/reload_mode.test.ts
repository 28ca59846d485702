// The reload mode's plumbing: `[inference] reload` (default "in-flight" for rlx train's policy),
// typed and validated by the schema and shown by --dry-run, and `rlx serve --reload-mode`
// (default drain) refusing anything but drain or in-flight before it loads the model.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

const ROOT = join(import.meta.dir, "../../..");
const dir = mkdtempSync(join(tmpdir(), "rlx-reload-"));
const path = join(dir, "c.toml");
writeFileSync(
  path,
  `[model]\npath = "models/tiny"\n[orchestrator]\nbatch_size = 8\ngroup_size = 4\n[[orchestrator.train.env]]\nid = "math"\n`,
);

const rlx = (args: string[]) => {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
};

test("[inference] reload defaults to in-flight; --set picks drain", () => {
  expect(loadConfig(path).config.inference.reload).toBe("in-flight");
  expect(loadConfig(path, ["inference.reload=drain"]).config.inference.reload).toBe("drain");
});

test("--dry-run shows the mode, and an unknown one is an error naming the key", () => {
  const ok = rlx(["train", path, "--dry-run", "--set", "inference.reload=drain"]);
  expect(ok.code).toBe(0);
  expect(ok.out).toContain('reload = "drain"');
  const bad = rlx(["train", path, "--dry-run", "--set", "inference.reload=sometimes"]);
  expect(bad.code).toBe(1);
  expect(bad.err).toContain("inference.reload");
  expect(bad.err).toContain("in-flight");
});

test("rlx serve --reload-mode accepts only drain or in-flight", async () => {
  const model = await microModelDir();
  const bad = rlx(["serve", "--model", model, "--port", "0", "--reload-mode", "eager"]);
  expect(bad.code).toBe(1);
  expect(bad.err).toContain("--reload-mode eager: expected drain or in-flight");
});
