// TensorBoard event files as a user gets them: `rlx train` and `rlx eval --tensorboard` write
// them, and an independent reader (Debian's python3-protobuf, test/fixtures/tfevents_read.py,
// with its own CRC-32C) decodes every record with valid CRCs and finds every numeric
// metrics.jsonl key at its step, equal at float32 precision, and each row's time as the wall
// time. Also: an unnamed custom env is labelled by its file's id (`letters`), not its path.
import { expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ROOT, readMetrics, rlx, writeConfig, sharedWorkspace } from "./train_helpers.ts";

type Decoded = { file: string; step: number; wall_time: number; tag: string; value?: number; text?: string };

const PYTHON = "/usr/bin/python3";
const hasReader =
  existsSync(PYTHON) &&
  Bun.spawnSync([PYTHON, "-c", "import google.protobuf"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
if (!hasReader)
  console.warn("tensorboard.test.ts: skipped, /usr/bin/python3 has no google.protobuf (apt install python3-protobuf)");

function decode(dir: string): Decoded[] {
  const proc = Bun.spawnSync([PYTHON, join(ROOT, "test/fixtures/tfevents_read.py"), dir], { stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`tfevents_read.py: ${proc.stderr.toString()}`);
  return proc.stdout
    .toString()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Decoded);
}

const ws = sharedWorkspace();

test.skipIf(!hasReader)(
  "rlx train: every numeric metrics.jsonl key is a scalar at its step, and rollouts are text",
  async () => {
    const { path, runDir } = writeConfig(
      ws,
      "tb",
      `max_steps = 3
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 8
[orchestrator.eval]
interval = 2
num_examples = 2
k = 2
[[orchestrator.eval.env]]
id = "math"
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`,
    );
    const { code, out, err } = await rlx(["train", path, "--inference", "in-process"]).done;
    expect(err).not.toContain("error:");
    expect(code).toBe(0);
    expect(out).toMatch(/reward letters \d/);
    expect(out).not.toContain(ws.lettersEnv);

    expect(readdirSync(join(runDir, "tensorboard")).every((f) => f.startsWith("events.out.tfevents."))).toBe(true);
    const decoded = decode(join(runDir, "tensorboard"));
    const scalars = new Map(decoded.filter((d) => d.value !== undefined).map((d) => [`${d.step} ${d.tag}`, d]));
    const rows = readMetrics(runDir);
    expect(rows.map((r) => r.step)).toEqual([0, 1, 2, 3]);
    let checked = 0;
    for (const row of rows) {
      for (const [key, value] of Object.entries(row)) {
        if (key === "step" || key === "time" || typeof value !== "number") continue;
        const event = scalars.get(`${row.step} ${key}`);
        expect(event, `${key} at step ${row.step}`).toBeDefined();
        expect(event!.value).toBe(Math.fround(value));
        expect(event!.wall_time).toBe(row.time!);
        checked++;
      }
    }
    expect(checked).toBe(scalars.size);
    expect(Object.keys(rows[1]!)).toContain("reward/letters");
    expect(scalars.has("0 eval/math/avg@2")).toBe(true);

    const texts = decoded.filter((d) => d.text !== undefined);
    expect(texts.map((t) => `${t.step} ${t.tag}`)).toEqual([
      "1 rollouts/letters",
      "2 rollouts/letters",
      "3 rollouts/letters",
    ]);
    expect(texts[0]!.text).toMatch(/^\*\*reward \d\.\d{3}\*\* · task `train-\d+`/);
    expect(texts[0]!.text).toContain("Write some letters");
  },
  90_000,
);

test.skipIf(!hasReader)(
  "rlx eval --tensorboard DIR --step N: the eval metrics at step N, the replies as text",
  async () => {
    const dir = join(ws.dir, "eval");
    const json = join(ws.dir, "eval.json");
    const { code, err } = await rlx([
      "eval",
      "--model",
      ws.model,
      "--env",
      "math",
      "--n",
      "3",
      "--k",
      "2",
      "--max-tokens",
      "8",
      "--out",
      json,
      "--tensorboard",
      dir,
      "--step",
      "7",
    ]).done;
    expect(err).not.toContain("error:");
    expect(code).toBe(0);
    const report = (await Bun.file(json).json()) as { envs: Array<{ metrics: Record<string, number> }> };
    const decoded = decode(dir);
    const metrics = report.envs[0]!.metrics;
    for (const [key, value] of Object.entries(metrics)) {
      const event = decoded.find((d) => d.tag === `eval/math/${key}`);
      expect(event?.step).toBe(7);
      expect(event?.value).toBe(Math.fround(value));
    }
    expect(decoded.filter((d) => d.value !== undefined).length).toBe(Object.keys(metrics).length);
    expect(decoded.find((d) => d.tag === "replies/math")?.text).toContain("rewards ");
  },
  60_000,
);
