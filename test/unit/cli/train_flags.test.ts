// `rlx train`'s flags that are config keys: `--max-restarts N` is `--set ckpt.max_restarts=N`
// (src/cli/train.ts), applied after --set, and anything but a count is an error naming it; the
// restart and resume flags that cannot go together.
import { expect, test } from "bun:test";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../../..");
const QUICKSTART = join(ROOT, "configs/quickstart.toml");

function rlx(args: string[]) {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

test("--max-restarts N sets ckpt.max_restarts over --set; a non-count is an error", () => {
  const dry = rlx(["train", QUICKSTART, "--dry-run", "--json", "--set", "ckpt.max_restarts=1", "--max-restarts", "3"]);
  expect(dry.code).toBe(0);
  const { config } = JSON.parse(dry.out) as { config: { ckpt: { max_restarts: number; restart_backoff_s: number } } };
  expect(config.ckpt).toMatchObject({ max_restarts: 3, restart_backoff_s: 5 });
  const bad = rlx(["train", QUICKSTART, "--dry-run", "--max-restarts", "-1"]);
  expect(bad.code).toBe(1);
  expect(bad.err).toContain("error: --max-restarts -1: expected a number of restarts (0 or more)");
});

test("--max-restarts where a launcher starts the ranks, and --resume-if-any beside --resume or --force, are errors", () => {
  const external = rlx([
    "train",
    QUICKSTART,
    "--max-restarts",
    "2",
    "--set",
    "trainer.world_size=2",
    "--set",
    "trainer.dist.launcher=external",
  ]);
  expect(external.code).toBe(1);
  expect(external.err).toContain("rlx train starts 0 of the 2 trainer ranks");
  for (const flag of ["--resume", "--force"]) {
    const both = rlx(["train", QUICKSTART, "--resume-if-any", flag]);
    expect(both.code).toBe(1);
    expect(both.err).toContain(`--resume-if-any and ${flag}: choose one`);
  }
});
