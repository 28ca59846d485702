// The `search` environment: questions about a fictional world answered with a `search` tool
// (BM25 over one document per entity). Tool outputs are retrieved documents, so what ECHO can
// learn from them is mostly the corpus itself. Example task (two hops):
//
//   user:      In which country was Velmora Quist born? ...
//   assistant: <tool_call>{"name": "search", "arguments": {"query": "Velmora Quist"}}</tool_call>
//   tool:      [1] Velmora Quist\nVelmora Quist is a geologist born in Tarnhollow in 1961. ...
//   assistant: <tool_call>{"name": "search", "arguments": {"query": "Tarnhollow"}}</tool_call>
//   tool:      [1] Tarnhollow\nTarnhollow is a city in Brenithia, founded in 1204. ...
//   assistant: Answer: Brenithia
import { existsSync, readFileSync } from "node:fs";
import { z } from "zod";
import { EnvError } from "../../errors.ts";
import { toolCall, type ChatMessage } from "../../data/chat.ts";
import { finalReply, gradeReply } from "../answer.ts";
import { generateSplit, loadJsonlSplit, promptMessages, sampleTasks } from "../tasks.ts";
import { runToolCall, stringArg } from "../tools.ts";
import type { EnvDefinition, Task, Tool } from "../types.ts";
import { Bm25Index } from "./bm25.ts";
import { generateWorld, type Document } from "./corpus.ts";
import { makeQuestion } from "./questions.ts";

export const SEARCH_SYSTEM_PROMPT =
  "Answer questions about a fictional world. Your own knowledge does not apply: use the `search` tool, which returns " +
  "the best-matching documents of a local encyclopedia. When you know the answer, reply without a tool call and end with a line `Answer: <answer>`.";

const Args = z.strictObject({
  corpus_seed: z.number().int().default(0),
  people: z.number().int().min(10).default(300),
  companies: z.number().int().min(2).default(60),
  cities: z.number().int().min(2).default(40),
  countries: z.number().int().min(1).default(12),
  hops: z
    .array(z.union([z.literal(1), z.literal(2)]))
    .min(1)
    .default([1, 2]),
  top_k: z.number().int().min(1).max(20).default(3),
  train_size: z.number().int().positive().default(1000),
  eval_size: z.number().int().positive().default(100),
  eval_fraction: z.number().gt(0).lt(1).default(0.2),
  max_turns: z.number().int().min(1).default(4),
  /** Replaces SEARCH_SYSTEM_PROMPT; "" leaves the system message out (the tool schema stays). */
  system_prompt: z.string().optional(),
  /** JSONL of {title, text}: replaces the generated corpus (questions then come from data_file). */
  corpus_file: z.string().optional(),
  data_file: z.string().optional(),
});

type SearchArgs = z.infer<typeof Args>;

export function formatHits(documents: Document[], indices: number[]): string {
  if (indices.length === 0) return "no documents match the query";
  return indices
    .map((index, rank) => `[${rank + 1}] ${documents[index]!.title}\n${documents[index]!.text}`)
    .join("\n\n");
}

export function searchTool(documents: Document[], topK: number): Tool {
  const index = new Bm25Index(documents.map((d) => `${d.title}\n${d.text}`));
  return {
    spec: {
      type: "function",
      function: {
        name: "search",
        description: `Search the encyclopedia. Returns the ${topK} best-matching documents with their titles.`,
        parameters: {
          type: "object",
          properties: { query: { type: "string", description: "keywords, e.g. a name" } },
          required: ["query"],
        },
      },
    },
    run(args) {
      const query = stringArg(args, "query");
      if (typeof query !== "string") return { output: query.error, isError: true };
      return {
        output: formatHits(
          documents,
          index.search(query, topK).map((hit) => hit.index),
        ),
        isError: false,
      };
    },
  };
}

function readCorpus(path: string): Document[] {
  if (!existsSync(path))
    throw new EnvError(`corpus file ${path} does not exist`, { fix: "check `corpus_file` in the search env's args" });
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line, i) => {
      const row = JSON.parse(line) as Partial<Document>;
      if (typeof row.title !== "string" || typeof row.text !== "string") {
        throw new EnvError(`${path}:${i + 1}: a corpus row needs "title" and "text" strings`, {
          fix: 'write rows like {"title": "...", "text": "..."}',
        });
      }
      return { title: row.title, text: row.text };
    });
}

const search: EnvDefinition<SearchArgs> = {
  id: "search",
  description:
    "questions over a generated fictional encyclopedia, answered with a BM25 `search` tool; exact-match reward",
  args: Args,
  create(args) {
    const world = generateWorld(args.corpus_seed, {
      countries: args.countries,
      cities: args.cities,
      companies: args.companies,
      people: args.people,
    });
    const documents = args.corpus_file ? readCorpus(args.corpus_file) : world.documents;
    if (args.corpus_file && !args.data_file)
      throw new EnvError("search: corpus_file needs data_file (questions about that corpus)", {
        fix: "set data_file to a JSONL of {question, answer} rows",
      });
    const tool = searchTool(documents, args.top_k);
    const task = (id: string, question: string, answer: string, queries?: string[], reasoning?: string[]): Task => ({
      id,
      prompt: promptMessages(args.system_prompt ?? SEARCH_SYSTEM_PROMPT, question),
      answer,
      solution: reasoning ? `${reasoning.join(" ")} The answer is ${answer}.` : undefined,
      info: queries ? { queries } : {},
    });
    return {
      tools: [tool],
      maxTurns: args.max_turns,
      async load(split, seed) {
        const size = split === "train" ? args.train_size : args.eval_size;
        if (args.data_file) {
          const rows = loadJsonlSplit(args.data_file, split, args.eval_fraction);
          return sampleTasks(rows, seed, size).map((row) => task(row.id!, row.question, row.answer));
        }
        return generateSplit("search", split, seed, size, args.eval_fraction, (rng) => {
          const q = makeQuestion(rng, world, args.hops);
          return task(q.key, q.question, q.answer, q.queries, q.reasoning);
        });
      },
      reward(t, rollout) {
        const grade = gradeReply(finalReply(rollout.messages), t.answer, false);
        return { reward: grade.correct, metrics: grade };
      },
      async demonstrate(t) {
        const messages: ChatMessage[] = [...t.prompt];
        for (const query of (t.info?.queries as string[] | undefined) ?? []) {
          const call = toolCall("search", { query });
          messages.push({ role: "assistant", content: "", tool_calls: [call] });
          messages.push((await runToolCall([tool], call, t)).message);
        }
        messages.push({ role: "assistant", content: `Answer: ${t.answer}` });
        return messages;
      },
    };
  },
};

export default search;
