// A custom env as a new user writes it (the kit form, with an args schema): a misspelled arg is an
// error naming the config file, the key path and the closest key, at --dry-run as at the start;
// and a run whose start fails in the env (its load throws) leaves nothing a rerun needs --force
// for: the rerun meets the env's error again, not "already holds a run".
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { rlx, sharedWorkspace, writeConfig } from "./train_helpers.ts";

const ws = sharedWorkspace();

function envFile(name: string, load: string): string {
  const path = join(ws.dir, `${name}.ts`);
  writeFileSync(
    path,
    `export default ({ z }) => ({
  id: "${name}",
  description: "reverse a word",
  args: z.strictObject({ words: z.number().int().positive().default(20) }),
  create: (args) => ({
    tools: [],
    maxTurns: 1,
    load: async (split) => { ${load} },
    reward: (task, rollout) => ({ reward: 0, metrics: {} }),
  }),
});
`,
  );
  return path;
}

const body = (env: string, args: string) => `max_steps = 1
[orchestrator]
batch_size = 4
group_size = 2
seq_len = 64
max_tokens = 4
[[orchestrator.train.env]]
id = ${JSON.stringify(env)}
args = ${args}
`;

test("a misspelled arg of a custom env is named with the closest key, at --dry-run and at the start", async () => {
  const env = envFile("rev", 'return [{ id: split + "-0", prompt: [{ role: "user", content: "ab" }], answer: "ba" }];');
  const { path } = writeConfig(ws, "typo", body(env, "{ wrods = 5 }"));
  const want = `orchestrator.train.env[0].args.wrods: unknown key; did you mean "words"? (the keys here: words)`;
  for (const args of [["--dry-run"], ["--inference", "in-process"]]) {
    const { code, err } = await rlx(["train", path, ...args]).done;
    expect(code).toBe(1);
    expect(err).toContain(`${path}: ${want}`);
  }
});

test("a start that fails in the env leaves nothing a rerun needs --force for", async () => {
  const env = envFile("broken", 'throw new Error("the word list is missing");');
  const { path } = writeConfig(ws, "broken", body(env, "{ words = 5 }"));
  for (const _ of [1, 2]) {
    const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
    expect(code).toBe(1);
    expect(err).toContain("the word list is missing");
    expect(err).not.toContain("already holds a run");
  }
});
