// How far training moved a policy: the exact per-token KL(model || start) of the next-token
// distributions, averaged over the positions that predict the assistant's content tokens of
// held-out gold demonstrations (rendered with the model's chat template as rollouts are; the
// positions obs_loss.ts scores). Exact, not sampled: both models give their whole distribution at
// each position (rlx_score_top with k = the vocabulary), which is affordable for the tiny models of
// docs/results.md. docs/results.md §6 holds seed-faithful OPSD to a KL of at least 0.01 here.
//
//   bun experiments/scripts/policy_kl.ts MODEL_DIR START_DIR DEMOS.jsonl [--role assistant] [--n ROWS] [--json]
import { parseArgs } from "node:util";
import { ConfigError } from "../../src/errors.ts";
import { loadModel } from "../../src/model/hf.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { loadNative } from "../../src/native/ffi.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { scoreTop } from "../../src/native/score_top.ts";
import { readSftRows } from "../../src/sft/data.ts";
import { observationTokens } from "./obs_loss.ts";

/** Per sequence, per selected position: the full next-token distribution as logprobs by token id. */
function distributions(model: NativeModel, seqs: { tokenIds: number[]; selected: number[] }[], vocab: number) {
  const out: Float64Array[][] = [];
  const batch = 16;
  for (let i = 0; i < seqs.length; i += batch) {
    const chunk = seqs.slice(i, i + batch);
    const scored = scoreTop(
      model,
      chunk.map((s) => s.tokenIds),
      { k: vocab },
    );
    chunk.forEach((s, j) =>
      out.push(
        s.selected.map((t) => {
          const top = scored[j]!.top[t]!;
          const lp = new Float64Array(vocab).fill(-Infinity);
          top.ids.forEach((id, r) => (lp[id] = top.logprobs[r]!));
          return lp;
        }),
      ),
    );
  }
  return out;
}

export async function policyKl(modelDir: string, startDir: string, demosPath: string, role = "assistant", n = 0) {
  await loadNative();
  const tokenizer = Tokenizer.load(modelDir);
  const renderer = new ChatRenderer(tokenizer);
  const rows = readSftRows([demosPath]).slice(0, n > 0 ? n : undefined);
  const seqs = rows.map((conv) => observationTokens(renderer, conv, role));
  const tokens = seqs.reduce((a, s) => a + s.selected.length, 0);
  if (tokens === 0)
    throw new ConfigError(`${demosPath}: no content tokens of role "${role}"`, {
      fix: "pass demonstrations or another --role",
    });
  const [model, start] = [await loadModel(modelDir), await loadModel(startDir)];
  try {
    const vocab = model.config.vocab_size;
    const [p, q] = [distributions(model, seqs, vocab), distributions(start, seqs, vocab)];
    let sum = 0;
    p.forEach((seq, i) =>
      seq.forEach((lp, t) => {
        for (let v = 0; v < vocab; v++) if (lp[v]! > -Infinity) sum += Math.exp(lp[v]!) * (lp[v]! - q[i]![t]![v]!);
      }),
    );
    return { rows: rows.length, tokens, kl: sum / tokens };
  } finally {
    model.free();
    start.free();
  }
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    options: {
      role: { type: "string", default: "assistant" },
      n: { type: "string", default: "0" },
      json: { type: "boolean" },
    },
    allowPositionals: true,
  });
  const { role, json } = values;
  const n = Number(values.n);
  const [modelDir, startDir, demos] = positionals;
  if (!modelDir || !startDir || !demos)
    throw new ConfigError(
      "usage: policy_kl.ts MODEL_DIR START_DIR DEMOS.jsonl [--role assistant] [--n ROWS] [--json]",
      {
        fix: "give the trained model, the model it started from and a demonstrations JSONL file",
      },
    );
  const result = await policyKl(modelDir, startDir, demos, role, n);
  if (json) console.log(JSON.stringify({ model: modelDir, start: startDir, demos, role, ...result }));
  else
    console.log(
      `${modelDir} vs ${startDir}: ${result.tokens} ${role} tokens of ${result.rows} rows, KL ${result.kl.toFixed(4)} nats/token`,
    );
}
