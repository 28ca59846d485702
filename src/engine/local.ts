// LocalClient: the SamplingClient over an in-process Engine, no HTTP. Tests of the rollout driver,
// the train loop, `rlx eval` and `rlx sft` run the real generator on a real tiny model through the
// same interface the OpenAI client implements, and concurrent complete() calls share batches
// exactly as they would on `rlx serve`.
//
// It speaks the CompletionRequest contract literally: the prompt is token ids, `stop` are token
// ids (the stop token is included in the completion), topK <= 0 is off, and the logprobs are the
// trainer's (log_softmax(logits / temperature) of the chosen token); topLogprobs and scoreTop
// give the same alternatives `rlx serve` answers for logprobs = N and prompt_logprobs = N.
import { EngineClosedError } from "./errors.ts";
import { Engine } from "./engine.ts";
import type { EngineOptions } from "./engine_api.ts";
import type { NativeModel } from "../native/model.ts";
import type { Completion, CompletionRequest, SamplingClient, ScoredSequence } from "../clients/types.ts";

export interface LocalClientOptions extends Partial<EngineOptions> {}

export class LocalClient implements SamplingClient {
  constructor(readonly engine: Engine) {}

  /** Loads an HF model directory and serves it in-process (maxBatch default 16). */
  static async fromModelDir(
    dir: string,
    options: LocalClientOptions & { dtype?: NativeModel["dtype"]; device?: string } = {},
  ): Promise<LocalClient> {
    const { loadModel } = await import("../model/hf.ts");
    const model = await loadModel(dir, { dtype: options.dtype ?? "f32", device: options.device ?? "cpu" });
    return new LocalClient(new Engine(model, { maxBatch: 16, ...options, ownsModel: true }));
  }

  /** Serves a model the caller owns (it is not freed by close(); a weight reload stops using it). */
  static fromModel(model: NativeModel, options: LocalClientOptions = {}): LocalClient {
    return new LocalClient(new Engine(model, { maxBatch: 16, ...options, ownsModel: false }));
  }

  get version(): number {
    return this.engine.version;
  }

  get vocabSize(): number {
    return this.engine.vocabSize;
  }

  async complete(request: CompletionRequest & { signal?: AbortSignal }): Promise<Completion> {
    const result = await this.engine.submit({
      prompt: request.promptIds,
      sampling: {
        temperature: request.temperature,
        topP: request.topP,
        topK: request.topK > 0 ? request.topK : 0,
        maxNewTokens: request.maxTokens,
        stopTokenIds: request.stop,
        ...(request.seed === undefined ? {} : { seed: request.seed }),
      },
      ...(request.signal ? { signal: request.signal } : {}),
      ...(request.session === undefined ? {} : { tag: request.session }),
      ...(request.topLogprobs ? { topLogprobs: request.topLogprobs } : {}),
    });
    if (result.finish === "abort") throw new EngineClosedError("the completion was cancelled");
    return {
      tokenIds: result.tokens,
      logprobs: result.logprobs,
      finishReason: result.finish,
      policyVersion: result.version,
      ...(result.topLogprobs ? { topLogprobs: result.topLogprobs } : {}),
    };
  }

  async score(sequences: number[][]): Promise<number[][]> {
    return this.engine.score(sequences).logprobs.map((lp) => Array.from(lp));
  }

  async scoreTop(sequences: number[][], k: number): Promise<ScoredSequence[]> {
    return this.engine.scoreTop(sequences, k).map((s) => ({ logprobs: Array.from(s.logprobs), top: s.top }));
  }

  /** Loads new weights between batches (as POST /update_weights does on a policy server). */
  async updateWeights(path: string, version: number): Promise<void> {
    await this.engine.reloadWeights(path, version);
  }

  close(): Promise<void> {
    return this.engine.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
