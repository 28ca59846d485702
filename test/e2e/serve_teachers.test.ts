// Frozen teachers over HTTP: two `rlx serve` instances with different weights at two URLs, each
// reached through its own OpenAIClient as opd does for two envs (multi-teacher distillation).
// Each teacher's prompt-logprob scores equal its own model's native scores, the tokenizer check
// opd runs at setup passes against both, and a teacher with another tokenizer is refused with a
// message that says so.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { OpenAIClient } from "../../src/clients/client.ts";
import { loadModel } from "../../src/model/hf.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { score } from "../../src/native/generate.ts";
import { type AlgorithmContext } from "../../src/algorithms/base.ts";
import { checkSameTokenizer } from "../../src/algorithms/opd.ts";
import { microModelDir } from "../fixtures/serve_model.ts";
import { type ServeProcess, startServe } from "./serve_harness.ts";

const servers: ServeProcess[] = [];
const dirs: string[] = [];
let student: Tokenizer;

beforeAll(async () => {
  dirs.push(await microModelDir({ seed: 21 }), await microModelDir({ seed: 22 }));
  // A third teacher whose tokenizer has one more added token than the student's.
  const odd = `${dirs[0]}-odd`;
  cpSync(dirs[0]!, odd, { recursive: true });
  const json = JSON.parse(readFileSync(`${odd}/tokenizer.json`, "utf8"));
  json.added_tokens.push({
    id: 259,
    content: "<|extra|>",
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  writeFileSync(`${odd}/tokenizer.json`, JSON.stringify(json));
  dirs.push(odd);
  for (const [i, dir] of dirs.entries())
    servers.push(
      await startServe([
        "--model",
        dir,
        "--served-model-name",
        `teacher${i}`,
        "--max-batch",
        "4",
        "--max-model-len",
        "128",
      ]),
    );
  student = Tokenizer.load(dirs[0]!);
});

afterAll(async () => {
  for (const s of servers) expect(await s.stop()).toBe(0);
});

const teacher = (i: number) =>
  new OpenAIClient({ model: `teacher${i}`, baseUrls: [`${servers[i]!.url}/v1`], retries: 2, backoffMs: 10 });
const context = { tokenizer: { size: 0, encodePlain: () => [] } } as unknown as AlgorithmContext;

test("two teachers at two URLs score with their own weights, concurrently", async () => {
  const sequences = [
    [5, 6, 7, 8, 9],
    [100, 101, 102],
  ];
  const [a, b] = await Promise.all([teacher(0).score(sequences), teacher(1).score(sequences)]);
  for (const [i, got] of [a!, b!].entries()) {
    using model = await loadModel(dirs[i]!);
    // The server scores each sequence in its own request, so compare with per-sequence native calls.
    const ref = sequences.map((s) => Array.from(score(model, [s]).logprobs[0]!));
    expect(got).toEqual(ref);
  }
  expect(a).not.toEqual(b);
});

test("opd's tokenizer check passes for same-tokenizer teachers and refuses another tokenizer", async () => {
  const ctx = { ...context, tokenizer: student };
  expect(await teacher(0).vocabSize()).toBe(student.size);
  await checkSameTokenizer(ctx, teacher(0), "teacher0");
  await checkSameTokenizer(ctx, teacher(1), "teacher1");
  expect(await teacher(2).vocabSize()).toBe(student.size + 1);
  await expect(checkSameTokenizer(ctx, teacher(2), "teacher2")).rejects.toThrow(
    /teacher2 has a tokenizer of 260 ids, the policy's has 259/,
  );
});
