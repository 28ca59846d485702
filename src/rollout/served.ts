// An env-driven episode (an env with `drive`, e.g. a verifiers-style Python env, docs/environments.md):
// the env runs the conversation and calls the policy through the OpenAI-compatible endpoint rlx gives
// it (endpoint.ts) with a key of this episode's own. Each chat completion it asks for is a turn of
// this rollout: its messages are rendered with the chat template, sampled by the run's client with
// the run's sampling settings (the env's temperature and top_p are not the run's to change: the
// trainer needs the logprobs it sampled with), and the tokens and logprobs kept as the driver keeps
// them (sequence.ts). The env never returns tokens: when its next request repeats the conversation
// so far, the new messages are bridged onto the sample; a conversation the env rewrote starts a new
// sample. The env's reward and metrics come back with the episode (rollout.info.envReward).
import type { ChatMessage } from "../data/chat.ts";
import type { Rollout } from "../data/types.ts";
import type { RenderOptions } from "../model/render.ts";
import type { Completion } from "../clients/types.ts";
import { Semaphore } from "../clients/http.ts";
import { readChatInputs, readMessages } from "../serve/chat_request.ts";
import type { Fields } from "../serve/fields.ts";
import { chatLogprobs, nowSeconds, requestId, usage } from "../serve/openai.ts";
import type { RolloutRequest } from "./driver.ts";
import { episodeEndpoint, POLICY_MODEL, refuse } from "./endpoint.ts";
import { RolloutLimit, RolloutTokens, raceDeadline } from "./sequence.ts";

/** Runs one env-driven episode into `rollout`; throws (the rollout fails) on any failure. */
export async function driveServed(req: RolloutRequest, rollout: Rollout, deadline: number): Promise<void> {
  const episode = new ServedEpisode(req, rollout);
  const endpoint = episodeEndpoint();
  const { key, release } = endpoint.register((fields) => episode.complete(fields));
  const controller = new AbortController();
  try {
    const result = await raceDeadline(
      req.env.drive!({
        task: req.task,
        policy: { baseUrl: endpoint.baseUrl, apiKey: key, model: POLICY_MODEL },
        signal: controller.signal,
      }),
      deadline,
    ).catch((err) => {
      throw episode.failure ?? err; // the env failed because its turn did: that is the reason
    });
    if (episode.failure) throw episode.failure;
    if (rollout.numTurns === 0) throw new Error(`env ${req.envId} ended its episode without calling the policy`);
    if (!Number.isFinite(result.reward))
      throw new Error(`env ${req.envId} returned a non-finite reward (${result.reward})`);
    episode.finish(result.messages);
    rollout.info.envReward = { reward: result.reward, metrics: result.metrics ?? {} };
  } finally {
    release();
    controller.abort();
  }
}

/** The same message for the purpose of "the env repeated the conversation": role, text, tool calls. */
function sameMessage(a: ChatMessage, b: ChatMessage): boolean {
  const calls = (m: ChatMessage) => JSON.stringify((m.tool_calls ?? []).map((c) => c.function));
  return a.role === b.role && a.content.trim() === b.content.trim() && calls(a) === calls(b);
}

class ServedEpisode {
  private readonly tokens: RolloutTokens;
  private readonly lock = new Semaphore(1);
  private last: Completion | undefined;
  /** A failure of this episode's own (a limit, the sampling client): fails the rollout even when the env carries on. */
  failure: Error | undefined;

  constructor(
    private readonly req: RolloutRequest,
    private readonly rollout: Rollout,
  ) {
    this.tokens = new RolloutTokens(rollout, req.renderer);
  }

  /** One chat completion request of the episode, answered in OpenAI's shape. */
  complete(fields: Fields): Promise<Record<string, unknown>> {
    return this.lock.run(async () => {
      const { req, rollout } = this;
      if (fields.bool("stream", false)) refuse("stream is not supported on an episode's policy endpoint", "stream");
      if (fields.int("n", 1) !== 1) refuse("n must be 1: each completion is one turn of the episode", "n");
      if (rollout.numTurns >= req.env.maxTurns)
        refuse(`the episode has had its ${req.env.maxTurns} model turns (the env's max_turns)`);
      const inputs = readChatInputs(fields);
      const options: RenderOptions = {
        tools: inputs.tools,
        addGenerationPrompt: true,
        templateArgs: { ...req.templateArgs, ...inputs.templateArgs },
      };
      this.follow(inputs.messages, options);
      const room = (req.maxContextTokens ?? Number.POSITIVE_INFINITY) - this.tokens.sequence.length;
      if (room <= 0)
        this.fail(
          new RolloutLimit(
            `context limit: the prompt has ${this.tokens.sequence.length} tokens, max_context_tokens is ${req.maxContextTokens}`,
          ),
        );
      const asked =
        fields.int("max_completion_tokens", undefined, { min: 1 }) ?? fields.int("max_tokens", undefined, { min: 1 });
      const { seed } = req.sampling;
      let completion: Completion;
      try {
        completion = await req.client.complete({
          promptIds: this.tokens.sequence,
          maxTokens: Math.min(req.sampling.maxTokens, asked ?? Number.POSITIVE_INFINITY, room),
          temperature: req.sampling.temperature,
          topP: req.sampling.topP,
          topK: req.sampling.topK,
          stop: req.renderer.tokenizer.stopIds,
          seed: seed === undefined ? undefined : seed + rollout.numTurns,
          session: rollout.id,
        });
      } catch (err) {
        this.fail(err as Error);
      }
      const promptLength = this.tokens.sequence.length;
      const { message } = this.tokens.sampled(completion, req.sampling.temperature);
      rollout.stopReason = completion.finishReason === "length" ? "length" : "done";
      this.last = completion;
      return this.response(message, completion, promptLength, fields.bool("logprobs", false));
    });
  }

  /** The env's final conversation: messages after the last turn (a last tool result) are kept. */
  finish(messages: unknown[] | undefined): void {
    if (!messages) return;
    const final = readMessages(messages);
    if (this.repeats(final)) this.rollout.messages.push(...final.slice(this.rollout.messages.length));
  }

  private fail(err: Error): never {
    this.failure ??= err;
    throw err;
  }

  private repeats(messages: ChatMessage[]): boolean {
    const known = this.rollout.messages;
    return messages.length >= known.length && known.every((m, i) => sameMessage(m, messages[i]!));
  }

  /** Takes the request's conversation into the rollout: the first, an extension, or a rewrite. */
  private follow(messages: ChatMessage[], options: RenderOptions): void {
    const { rollout } = this;
    if (this.last && this.repeats(messages)) {
      if (messages.length === rollout.messages.length)
        refuse(
          "the conversation ends with the policy's last reply: add the next message (a tool result, a user turn)",
          "messages",
        );
      rollout.messages.push(...messages.slice(rollout.messages.length));
      return this.tokens.extend(this.last, options);
    }
    rollout.messages = [...messages];
    this.tokens.render(options);
  }

  private response(message: ChatMessage, completion: Completion, promptLength: number, withLogprobs: boolean) {
    const tokenizer = this.req.renderer.tokenizer;
    const calls = message.tool_calls ?? [];
    const turn = this.rollout.numTurns;
    return {
      id: requestId("chatcmpl"),
      object: "chat.completion",
      created: nowSeconds(),
      model: POLICY_MODEL,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: calls.length > 0 && message.content.trim() === "" ? null : message.content,
            ...(message.reasoning_content ? { reasoning_content: message.reasoning_content } : {}),
            tool_calls: calls.map((call, j) => ({
              id: `call_${turn}_${j}`,
              type: "function",
              function: { name: call.function.name, arguments: JSON.stringify(call.function.arguments) },
            })),
          },
          logprobs: withLogprobs
            ? chatLogprobs(
                completion.tokenIds.map((id) => tokenizer.decode([id])),
                completion.logprobs,
                [],
                (id) => tokenizer.decode([id]),
              )
            : null,
          finish_reason:
            completion.finishReason === "stop" && calls.length > 0 ? "tool_calls" : completion.finishReason,
          token_ids: completion.tokenIds,
        },
      ],
      usage: usage(promptLength, completion.tokenIds.length),
      policy_version: completion.policyVersion,
    };
  }
}
