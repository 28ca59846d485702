// The held-out observation-prediction loss of experiment 7 (ECHO vs GRPO): how well a model
// predicts what the environment says back. For each demonstration row (`rlx env demos ENV --split
// eval`), the conversation is rendered with the model's own chat template exactly as rollouts are
// (ChatRenderer, tools included), scored by one prefill, and -log p is averaged over the content
// tokens of the messages of one role (tool by default): the tokens ECHO puts its ce weight on,
// minus nothing, since a tool message always follows the first model turn. The first token of a
// sequence has no prediction and is never counted. Tokens that are decimal digits are also
// averaged apart: in forth a tool output is a computed number plus fixed scaffold ("stack: <0>"),
// and only the number needs the program to be understood.
//
//   bun experiments/scripts/obs_loss.ts MODEL_DIR DEMOS.jsonl [--role tool] [--n ROWS] [--json]
import { parseArgs } from "node:util";
import { ConfigError } from "../../src/errors.ts";
import { loadModel } from "../../src/model/hf.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { loadNative } from "../../src/native/ffi.ts";
import { score } from "../../src/native/generate.ts";
import { readSftRows, type SftConversation } from "../../src/sft/data.ts";

export interface ObsLoss {
  rows: number;
  tokens: number;
  /** Mean -log p over the selected tokens. */
  nll: number;
  digitTokens: number;
  digitNll: number;
  otherTokens: number;
  otherNll: number;
}

/** Per sequence: indices of the tokens to score (content of `role` messages, never index 0). */
export function observationTokens(
  renderer: ChatRenderer,
  conv: SftConversation,
  role: string,
): { tokenIds: number[]; selected: number[] } {
  const r = renderer.render(conv.messages, { tools: conv.tools, addGenerationPrompt: false });
  const selected: number[] = [];
  for (let t = 1; t < r.tokenIds.length; t++) {
    if (r.isContent[t] && conv.messages[r.messageIndex[t]!]?.role === role) selected.push(t);
  }
  return { tokenIds: r.tokenIds, selected };
}

export async function observationLoss(
  modelDir: string,
  demosPath: string,
  role = "tool",
  maxRows = 0,
): Promise<ObsLoss> {
  await loadNative();
  const tokenizer = Tokenizer.load(modelDir);
  const renderer = new ChatRenderer(tokenizer);
  const rows = readSftRows([demosPath]).slice(0, maxRows > 0 ? maxRows : undefined);
  const seqs = rows.map((conv) => observationTokens(renderer, conv, role));
  const model = await loadModel(modelDir);
  const sums = { all: [0, 0], digit: [0, 0], other: [0, 0] } as Record<string, [number, number]>;
  try {
    const batch = 16; // rows per prefill: bounds activation memory on long demonstrations
    for (let i = 0; i < seqs.length; i += batch) {
      const chunk = seqs.slice(i, i + batch);
      const { logprobs } = score(
        model,
        chunk.map((s) => s.tokenIds),
      );
      chunk.forEach((s, k) => {
        for (const t of s.selected) {
          const nll = -logprobs[k]![t]!;
          const kind = /^[0-9]$/.test(tokenizer.decode([s.tokenIds[t]!])) ? "digit" : "other";
          for (const key of ["all", kind]) ((sums[key]![0] += nll), (sums[key]![1] += 1));
        }
      });
    }
  } finally {
    model.free();
  }
  const mean = ([sum, n]: [number, number]) => (n > 0 ? sum / n : NaN);
  if (sums.all![1] === 0) {
    throw new ConfigError(`${demosPath}: no content tokens of role "${role}" in ${rows.length} rows`, {
      fix: "pass demonstrations whose conversations contain that role (e.g. `rlx env demos forth --split eval`), or another --role",
    });
  }
  return {
    rows: rows.length,
    tokens: sums.all![1],
    nll: mean(sums.all!),
    digitTokens: sums.digit![1],
    digitNll: mean(sums.digit!),
    otherTokens: sums.other![1],
    otherNll: mean(sums.other!),
  };
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    options: {
      role: { type: "string", default: "tool" },
      n: { type: "string", default: "0" },
      json: { type: "boolean" },
    },
    allowPositionals: true,
  });
  const { role, json } = values;
  const n = Number(values.n);
  const [modelDir, demos] = positionals;
  if (!modelDir || !demos)
    throw new ConfigError("usage: obs_loss.ts MODEL_DIR DEMOS.jsonl [--role tool] [--n ROWS] [--json]", {
      fix: "give a model directory and a demonstrations JSONL file",
    });
  const loss = await observationLoss(modelDir, demos, role, n);
  if (json) console.log(JSON.stringify({ model: modelDir, demos, role, ...loss }));
  else {
    console.log(
      `${modelDir}  role ${role}: ${loss.rows} rows, ${loss.tokens} tokens, mean nll ${loss.nll.toFixed(4)}` +
        `  (digits ${loss.digitTokens} tokens ${loss.digitNll.toFixed(4)}, other ${loss.otherTokens} tokens ${loss.otherNll.toFixed(4)})`,
    );
  }
}
