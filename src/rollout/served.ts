// An env-driven episode (an env with `drive`, e.g. a verifiers-style Python env, docs/environments.md):
// the env runs the conversation and calls the policy through the OpenAI-compatible endpoint rlx gives
// it (endpoint.ts) with a key of this episode's own. Each chat completion it asks for is a turn of
// this rollout: its messages are rendered with the chat template, sampled by the run's client with
// the run's sampling settings (the env's temperature and top_p are not the run's to change: the
// trainer needs the logprobs it sampled with), and the tokens and logprobs kept as the driver keeps
// them (sequence.ts). The env never returns tokens: when its next request repeats the conversation
// so far, the new messages are bridged onto the sample; a conversation the env rewrote starts a new
// sample appended after the others. A turn whose tool call does not parse goes back as its text, as
// vLLM's tool parser returns it. The episode's first failure (a limit, the sampling client) fails the
// rollout and every later request; a request still in flight when the env returns adds nothing. The
// env's reward and metrics come back with the episode (rollout.info.envReward).
import type { ChatMessage } from "../data/chat.ts";
import type { Rollout } from "../data/types.ts";
import type { RenderOptions } from "../model/render.ts";
import type { Completion } from "../clients/types.ts";
import { Semaphore } from "../clients/http.ts";
import { type ChatInputs, readChatInputs, readMessages } from "../serve/chat_request.ts";
import { InvalidRequestError } from "../engine/errors.ts";
import type { Fields } from "../serve/fields.ts";
import { chatLogprobs, nowSeconds, requestId, usage } from "../serve/openai.ts";
import type { RolloutRequest } from "./driver.ts";
import { episodeEndpoint, POLICY_MODEL, refuse } from "./endpoint.ts";
import { endsAtContext, RolloutLimit, RolloutTokens, raceDeadline } from "./sequence.ts";

/** Runs one env-driven episode into `rollout`; throws (the rollout fails) on any failure. */
export async function driveServed(
  req: RolloutRequest,
  rollout: Rollout,
  counters: Record<string, number>,
  deadline: number,
): Promise<void> {
  const episode = new ServedEpisode(req, rollout, counters);
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
    episode.closed = true; // a request still in flight records nothing now
    if (episode.failure) throw episode.failure;
    if (rollout.numTurns === 0) throw new Error(`env ${req.envId} ended its episode without calling the policy`);
    if (!Number.isFinite(result.reward))
      throw new Error(`env ${req.envId} returned a non-finite reward (${result.reward})`);
    episode.finish(result.messages);
    rollout.info.envReward = { reward: result.reward, metrics: result.metrics ?? {} };
  } finally {
    episode.closed = true;
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
  /** What failed the episode (a limit, the sampling client, a bad completion): later requests are refused. */
  failure: Error | undefined;
  /** Set once the env's episode has returned: a request still in flight must not add a turn. */
  closed = false;

  constructor(
    private readonly req: RolloutRequest,
    private readonly rollout: Rollout,
    private readonly counters: Record<string, number>,
  ) {
    this.tokens = new RolloutTokens(rollout, req.renderer);
  }

  /** One chat completion request of the episode, answered in OpenAI's shape. */
  complete(fields: Fields): Promise<Record<string, unknown>> {
    return this.lock.run(async () => {
      const { req, rollout } = this;
      if (this.closed) refuse("the episode has ended");
      if (this.failure) refuse(`the episode has failed: ${this.failure.message}`);
      if (fields.bool("stream", false)) refuse("stream is not supported on an episode's policy endpoint", "stream");
      if (fields.int("n", 1) !== 1) refuse("n must be 1: each completion is one turn of the episode", "n");
      if (rollout.numTurns >= req.env.maxTurns)
        refuse(`the episode has had its ${req.env.maxTurns} model turns (the env's max_turns)`);
      const inputs = readChatInputs(fields);
      const asked =
        fields.int("max_completion_tokens", undefined, { min: 1 }) ?? fields.int("max_tokens", undefined, { min: 1 });
      if (rollout.stopReason === "context") refuse("the episode reached its context limit (context_limit = truncate)");
      try {
        return await this.turn(inputs, asked, fields.bool("logprobs", false));
      } catch (err) {
        if (err instanceof InvalidRequestError) throw err;
        // With context_limit = "truncate" the episode ends here; the env hears a 400 and may finish it.
        if (endsAtContext(err, req.contextLimit, rollout.numTurns)) rollout.stopReason = "context";
        else this.failure ??= err as Error;
        // A limit the episode ran into is the request's fault (400); anything else the server's (500).
        throw err instanceof RolloutLimit ? new InvalidRequestError((err as Error).message, null) : err;
      }
    });
  }

  /** Renders the request's conversation onto the rollout, samples the turn and answers it. */
  private async turn(inputs: ChatInputs, asked: number | undefined, withLogprobs: boolean) {
    const { req, rollout } = this;
    const options: RenderOptions = {
      tools: inputs.tools,
      addGenerationPrompt: true,
      templateArgs: { ...req.templateArgs, ...inputs.templateArgs },
    };
    this.follow(inputs.messages, options);
    const promptLength = this.tokens.sequence.length;
    const maxContext = req.maxContextTokens ?? Number.POSITIVE_INFINITY;
    const cap = Math.min(req.sampling.maxTokens, asked ?? Number.POSITIVE_INFINITY);
    const completion = await this.tokens.next(req.client, req.sampling, maxContext, cap);
    if (this.closed) refuse("the episode ended while this turn was sampled");
    const turn = this.tokens.sampled(completion, req.sampling.temperature, true);
    this.counters.malformed_tool_calls! += turn.blocks.filter((block) => "error" in block).length;
    rollout.stopReason = completion.finishReason === "length" ? "length" : "done";
    this.last = completion;
    return this.response(turn.message, completion, promptLength, withLogprobs);
  }

  /** The env's final conversation: messages after the last turn (a last tool result) are kept. A
   * conversation that does not repeat the rollout's, or does not parse, leaves it as it is. */
  finish(messages: unknown[] | undefined): void {
    if (!messages?.length) return;
    let final: ChatMessage[];
    try {
      final = readMessages(messages);
    } catch {
      return;
    }
    if (this.repeats(final)) this.rollout.messages.push(...final.slice(this.current().length));
  }

  /** The current sample's conversation. */
  private current(): ChatMessage[] {
    return this.rollout.messages.slice(this.tokens.from);
  }

  private repeats(messages: ChatMessage[]): boolean {
    const known = this.current();
    return messages.length >= known.length && known.every((m, i) => sameMessage(m, messages[i]!));
  }

  /** Takes the request's conversation into the rollout: the first, an extension of the current one
   * (bridged onto its sample), or a rewrite: a new conversation appended after the others, so every
   * segment's messageIndex stays valid, and rendered as a new sample. */
  private follow(messages: ChatMessage[], options: RenderOptions): void {
    const { rollout } = this;
    if (this.last && this.repeats(messages)) {
      const known = this.current().length;
      if (messages.length === known)
        refuse(
          "the conversation ends with the policy's last reply: add the next message (a tool result, a user turn)",
          "messages",
        );
      rollout.messages.push(...messages.slice(known));
      return this.tokens.extend(this.last, options);
    }
    if (!this.last) {
      rollout.messages = [...messages]; // the first request: its conversation replaces the task's prompt
      return this.tokens.render(options, 0);
    }
    const from = rollout.messages.length;
    rollout.messages.push(...messages);
    this.tokens.render(options, from);
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
