// The trainer and the policy engine handing the cores over (src/native/core_share.ts): whichever is
// busy alone runs on all the cores, both busy split them, and a flag written by another process
// is seen through the shared file at once.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { RlxError } from "../../src/errors.ts";
import { CORE_SHARE_ENV, CoreShare, sharedThreads } from "../../src/native/core_share.ts";
import { loadNative, native } from "../../src/native/ffi.ts";
import { runtimeInfo } from "../../src/native/runtime.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-cores-"));
afterAll(() => {
  native().rlx_set_threads(cpus().length); // later tests in this process keep their threads
  rmSync(dir, { recursive: true, force: true });
});
const threads = async () => (await runtimeInfo()).threads;

test("shares: the trainer half the cores rounded up, the generator the rest, one at least", () => {
  expect(sharedThreads(1)).toEqual({ trainer: 1, generator: 1 });
  expect(sharedThreads(2)).toEqual({ trainer: 1, generator: 1 });
  expect(sharedThreads(3)).toEqual({ trainer: 2, generator: 1 });
  expect(sharedThreads(16)).toEqual({ trainer: 8, generator: 8 });
});

test("each side takes all the cores while the other is idle and its share while it is busy", async () => {
  await loadNative();
  const path = CoreShare.create(join(dir, "in-process"));
  const trainer = CoreShare.open(path, "trainer", 3);
  const generator = CoreShare.open(path, "generator", 3);
  trainer.apply();
  expect(await threads()).toBe(3);
  generator.busy(true);
  trainer.busy(true);
  trainer.apply();
  expect(await threads()).toBe(2);
  generator.apply();
  expect(await threads()).toBe(1);
  trainer.busy(false);
  generator.apply();
  expect(await threads()).toBe(3);
  expect(trainer.rounds).toEqual({ shared: 1, whole: 1 });
  expect(generator.rounds).toEqual({ shared: 1, whole: 1 });
});

test("a flag another process sets is seen at the next round", async () => {
  await loadNative();
  const path = CoreShare.create(join(dir, "two-processes"));
  const trainer = CoreShare.open(path, "trainer", 4);
  const module = join(import.meta.dir, "../../src/native/core_share.ts");
  // the child marks the generator busy, says so, and clears the flag when its stdin closes
  const child = Bun.spawn(
    [
      process.execPath,
      "-e",
      `const { CoreShare } = await import(${JSON.stringify(module)});
       const share = CoreShare.fromEnv("generator");
       share.busy(true);
       console.log("busy");
       for await (const _ of Bun.stdin.stream()) {}
       share.busy(false);`,
    ],
    { env: { ...process.env, [CORE_SHARE_ENV]: path }, stdin: "pipe", stdout: "pipe" },
  );
  const reader = child.stdout.getReader();
  expect(new TextDecoder().decode((await reader.read()).value)).toBe("busy\n");
  trainer.apply();
  expect(await threads()).toBe(2);
  child.stdin.end();
  expect(await child.exited).toBe(0);
  trainer.apply();
  expect(await threads()).toBe(4);
});

test("a missing file named in the environment is an error that says who sets it", () => {
  const before = process.env[CORE_SHARE_ENV];
  process.env[CORE_SHARE_ENV] = join(dir, "nowhere");
  try {
    let error: RlxError | undefined;
    try {
      CoreShare.fromEnv("trainer");
    } catch (err) {
      error = err as RlxError;
    }
    expect(error).toBeInstanceOf(RlxError);
    expect(error?.message).toBe(`${CORE_SHARE_ENV}=${join(dir, "nowhere")}: no such file`);
    expect(error?.fix).toStartWith(`unset ${CORE_SHARE_ENV}: rlx train sets it`);
  } finally {
    if (before === undefined) delete process.env[CORE_SHARE_ENV];
    else process.env[CORE_SHARE_ENV] = before;
  }
});
