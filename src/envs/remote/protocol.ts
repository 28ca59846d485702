// The env server protocol (docs/environments.md, "Python environments"): what an environment served
// by another process answers, as zod schemas, and the calls rlx makes. JSON over HTTP, shaped after
// OpenEnv's reset/step (one session per episode, named by the id its reset returns, so many run at
// once) with messages in OpenAI's chat form:
//
//   GET  /info                                        -> {id, description, shape, tools = [], max_turns = 1}
//   POST /tasks {split, seed, args}                   -> {tasks: [{id, prompt, answer, solution?, info?}]}
//   POST /reset {task_id, args}                       -> {session_id, messages?}              (step)
//   POST /step  {session_id, message}                 -> {messages, reward, done, metrics?}   (step)
//   POST /close {session_id}                          -> {}                                   (step)
//   POST /run   {task_id, args, policy}               -> {messages?, reward, metrics?}        (env)
//
// A non-2xx answer is an error; its body's `error` is the reason. Every answer is checked here, so a
// server that answers something else fails its rollout with the field that is wrong.
import { z } from "zod";
import { EndpointError } from "../../errors.ts";
import { JsonEndpoint } from "../../clients/http.ts";

const message = z.looseObject({
  role: z.enum(["system", "user", "assistant", "tool"]),
  content: z
    .string()
    .nullish()
    .transform((c) => c ?? ""),
  name: z.string().optional(),
  tool_call_id: z.string().optional(),
});
const metrics = z.record(z.string(), z.number()).optional();

export const infoAnswer = z.object({
  id: z.string().min(1),
  description: z.string().default(""),
  shape: z.enum(["step", "env"]),
  tools: z
    .array(
      z.object({
        type: z.literal("function"),
        function: z.object({
          name: z.string(),
          description: z.string().default(""),
          parameters: z.record(z.string(), z.unknown()),
        }),
      }),
    )
    .default([]),
  max_turns: z.number().int().positive().default(1),
});
export type EnvInfo = z.infer<typeof infoAnswer>;

export const tasksAnswer = z.object({
  tasks: z.array(
    z.object({
      id: z.string().min(1),
      prompt: z.array(message).min(1),
      answer: z.string().default(""),
      solution: z.string().optional(),
      info: z.record(z.string(), z.unknown()).optional(),
    }),
  ),
});

export const resetAnswer = z.object({ session_id: z.string().min(1), messages: z.array(message).optional() });

export const stepAnswer = z.object({
  messages: z.array(message).default([]),
  reward: z.number(),
  done: z.boolean(),
  metrics,
});

export const runAnswer = z.object({ messages: z.array(z.unknown()).optional(), reward: z.number(), metrics });

/** A call to the server, its answer checked against `schema`. */
export async function call<T>(
  server: JsonEndpoint,
  path: string,
  body: unknown,
  schema: z.ZodType<T>,
  signal?: AbortSignal,
): Promise<T> {
  const answer = await server.request<unknown>(path, body, signal);
  const parsed = schema.safeParse(answer);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new EndpointError(
    `${server.url}${path}: the answer does not fit the env protocol: ${issue.path.join(".") || "(the body)"}: ${issue.message}`,
    { fix: 'see docs/environments.md, "The protocol"' },
  );
}
