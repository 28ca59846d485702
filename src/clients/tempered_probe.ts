// A check, at the start of a run on an external policy engine, that the logprobs it returns are
// of the tempered distribution it samples from (log_softmax(logits / T), what the trainer
// computes for the importance ratio), not of the raw logits: vLLM returns raw ones unless started
// with `--logprobs-mode processed_logprobs` (docs/engines.md). Logprob differences between two
// tokens are logit differences divided by T, so the gap between the two most likely tokens at
// T = 2 is half the gap at T = 1 when the logprobs are tempered, and the same when they are raw.
import { ConfigError, EndpointError } from "../errors.ts";
import type { SamplingClient, TopLogprobs } from "./types.ts";

/** The logprob gap between two tokens at `temperature`: `ids` if given, else the two most likely. */
async function topGap(client: SamplingClient, promptIds: number[], temperature: number, ids?: number[]) {
  const completion = await client.complete({
    promptIds,
    maxTokens: 1,
    temperature,
    topP: 1,
    topK: 0,
    stop: [],
    seed: 0,
    topLogprobs: 5,
  });
  const top: TopLogprobs | undefined = completion.topLogprobs?.[0];
  if (!top || top.ids.length < 2) throw new EndpointError("the policy engine returned no top logprobs (logprobs = 5)");
  const [a, b] = ids ?? [top.ids[0]!, top.ids[1]!];
  const [la, lb] = [a, b].map((id) => top.logprobs[top.ids.indexOf(id!)]);
  if (la === undefined || lb === undefined)
    throw new EndpointError(`the policy engine's top 5 at temperature ${temperature} lacks tokens ${a} and ${b}`);
  return { ids: [a!, b!], gap: la - lb };
}

/** Throws a ConfigError when the engine's logprobs are not of the tempered distribution. */
export async function checkTemperedLogprobs(client: SamplingClient, promptIds: number[], engine: string) {
  const one = await topGap(client, promptIds, 1);
  if (one.gap < 1e-3) return; // two tokens tied: the probe cannot tell, and nothing is wrong yet
  const two = await topGap(client, promptIds, 2, one.ids);
  const ratio = two.gap / one.gap;
  if (Math.abs(ratio - 0.5) <= 0.02) return;
  throw new ConfigError(
    `the ${engine} policy's logprobs are not of the tempered distribution: the top-2 gap is ${one.gap.toFixed(4)} at temperature 1 and ${two.gap.toFixed(4)} at 2 (ratio ${ratio.toFixed(3)}, tempered gives 0.5)`,
    {
      fix:
        engine === "vllm"
          ? "start vLLM with --logprobs-mode processed_logprobs (docs/engines.md)"
          : "make the engine return logprobs after temperature scaling (docs/engines.md), or sample at temperature 1",
    },
  );
}
