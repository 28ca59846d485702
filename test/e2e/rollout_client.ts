// An in-process SamplingClient over the native generator and scorer: the "tiny real model" the
// end-to-end rollout test samples from. It implements the same interface the HTTP client does
// (src/clients/types.ts), so the rollout driver runs unchanged against a real model with no
// server. One request at a time, which is all the test needs.
import type { Completion, CompletionRequest, SamplingClient } from "../../src/clients/types.ts";
import { generate, score } from "../../src/native/generate.ts";
import type { NativeModel } from "../../src/native/model.ts";

export class LocalSamplingClient implements SamplingClient {
  constructor(
    private readonly model: NativeModel,
    private readonly policyVersion = 0,
  ) {}

  async complete(request: CompletionRequest): Promise<Completion> {
    const [completion] = generate(this.model, [request.promptIds], {
      temperature: request.temperature,
      topP: request.topP,
      topK: Math.max(0, request.topK),
      maxNewTokens: request.maxTokens,
      seed: request.seed ?? 0,
      stopTokenIds: request.stop,
    });
    return {
      tokenIds: completion!.tokens,
      logprobs: completion!.logprobs,
      finishReason: completion!.finish,
      policyVersion: this.policyVersion,
    };
  }

  async score(sequences: number[][]): Promise<number[][]> {
    return score(this.model, sequences).logprobs.map((row) => Array.from(row));
  }
}
