// `rlx env`: look inside environments without a model. `list` names them; `show` prints tasks of
// a split; `tool` runs an env's tool exactly as a rollout would and prints the observation the
// model would see; `demos` writes gold demonstration conversations (tool calls and real tool
// outputs included) as chat-messages JSONL for `rlx sft` and OPSD. These are how a user debugs an
// environment and bootstraps a model before RL.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { defineCommand } from "citty";
import { ConfigError, EnvError, RlxError } from "../errors.ts";
import type { Env, EnvDefinition, Split } from "../envs/types.ts";

const envArgs = {
  args: {
    type: "string",
    description: "The env's args as JSON, e.g. '{\"digits\": 3}' (as in [[orchestrator.train.env]] args)",
  },
} as const;

function integer(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new ConfigError(`--${name} must be a non-negative integer, got "${value}"`);
  return n;
}

function split(value: string | undefined): Split {
  if (value === undefined || value === "train" || value === "eval") return value ?? "eval";
  throw new ConfigError(`--split must be "train" or "eval", got "${value}"`);
}

async function openEnv(id: string, argsJson: string | undefined): Promise<{ definition: EnvDefinition; env: Env }> {
  const { createEnv, loadEnv } = await import("../envs/index.ts");
  let args: unknown = {};
  if (argsJson !== undefined) {
    try {
      args = JSON.parse(argsJson);
    } catch (err) {
      throw new ConfigError(`--args is not valid JSON: ${(err as Error).message}`, {
        fix: `quote it for the shell: --args '{"digits": 3}'`,
      });
    }
  }
  const definition = await loadEnv(id, { source: "rlx env", path: [] });
  return { definition, env: await createEnv(definition, args, { source: "rlx env --args", path: [] }, id) };
}

const list = defineCommand({
  meta: {
    name: "list",
    description: "List the built-in environments, and a custom env file's or an env server's when given",
  },
  args: {
    file: {
      type: "positional",
      required: false,
      description: "A custom env's .ts file or an env server's URL, listed after the built-ins",
    },
    json: { type: "boolean", description: "Print JSON" },
  },
  async run({ args }) {
    const { envDefinitions, isEnvPath, isEnvUrl, loadEnv } = await import("../envs/index.ts");
    if (args.file && !isEnvPath(args.file) && !isEnvUrl(args.file))
      throw new ConfigError(`rlx env list ${args.file}: not a file path or a URL (the built-ins are listed anyway)`, {
        fix: "give a custom env's .ts file, e.g. ./my_env.ts, an env server's URL, or nothing",
      });
    const custom = args.file ? [await loadEnv(args.file, { source: "rlx env list", path: [] })] : [];
    const rows = [...envDefinitions(), ...custom].map((d) => ({ id: d.id, description: d.description }));
    if (args.json) return console.log(JSON.stringify(rows, null, 2));
    for (const row of rows) console.log(`${row.id.padEnd(8)} ${row.description}`);
  },
});

const show = defineCommand({
  meta: { name: "show", description: "Print tasks of an environment" },
  args: {
    id: {
      type: "positional",
      required: true,
      description: "Env id, path to a custom env .ts file, or an env server's URL",
    },
    split: { type: "string", description: "train or eval (default eval)" },
    n: { type: "string", description: "Number of tasks (default 3)" },
    seed: { type: "string", description: "Seed passed to load (default 0)" },
    json: { type: "boolean", description: "Print tasks as JSONL" },
    ...envArgs,
  },
  async run({ args }) {
    const { env } = await openEnv(args.id, args.args);
    const tasks = (await env.load(split(args.split), integer(args.seed, "seed", 0))).slice(0, integer(args.n, "n", 3));
    for (const task of tasks) {
      if (args.json) {
        console.log(JSON.stringify(task));
        continue;
      }
      console.log(`── ${task.id}`);
      for (const message of task.prompt) console.log(`[${message.role}] ${message.content}`);
      console.log(`[answer] ${task.answer}`);
      if (task.solution) console.log(`[solution] ${task.solution}`);
      console.log("");
    }
  },
});

const tool = defineCommand({
  meta: { name: "tool", description: "Run an env's tool and print exactly the observation the model would see" },
  args: {
    id: { type: "positional", required: true, description: "Env id, e.g. forth" },
    input: {
      type: "positional",
      required: false,
      description: "Value of the tool's one required string argument, e.g. '1 2 + .'",
    },
    name: { type: "string", description: "Tool name (default: the env's first tool)" },
    json: { type: "string", description: "The tool's arguments as a JSON object, instead of INPUT" },
    ...envArgs,
  },
  async run({ args }) {
    const { env } = await openEnv(args.id, args.args);
    const chosen = args.name ? env.tools.find((t) => t.spec.function.name === args.name) : env.tools[0];
    if (!chosen) {
      const names = env.tools.map((t) => t.spec.function.name).join(", ") || "none";
      throw new EnvError(`env ${args.id} has no tool ${args.name ? `"${args.name}"` : ""} (tools: ${names})`, {
        fix: "pick one with --name",
      });
    }
    let callArgs: Record<string, unknown>;
    if (args.json !== undefined) {
      callArgs = JSON.parse(args.json) as Record<string, unknown>;
    } else {
      const required = (chosen.spec.function.parameters.required as string[] | undefined) ?? [];
      if (required.length !== 1 || args.input === undefined) {
        throw new ConfigError(
          `tool ${chosen.spec.function.name} takes ${JSON.stringify(chosen.spec.function.parameters)}`,
          { fix: "pass its arguments with --json '{...}'" },
        );
      }
      callArgs = { [required[0]!]: args.input };
    }
    const { runToolCall } = await import("../envs/tools.ts");
    const observation = await runToolCall(
      env.tools,
      { type: "function", function: { name: chosen.spec.function.name, arguments: callArgs } },
      { id: "cli", prompt: [], answer: "" },
    );
    process.stdout.write(
      observation.message.content.endsWith("\n") ? observation.message.content : `${observation.message.content}\n`,
    );
    if (observation.isError) process.exitCode = 2;
  },
});

const demos = defineCommand({
  meta: {
    name: "demos",
    description: "Write gold demonstration conversations as chat-messages JSONL (for rlx sft and OPSD)",
  },
  args: {
    id: {
      type: "positional",
      required: true,
      description: "Env id, path to a custom env .ts file, or an env server's URL",
    },
    out: { type: "string", required: true, description: "Output JSONL file" },
    n: { type: "string", description: "Number of demonstrations (default 100)" },
    split: { type: "string", description: "train or eval (default train)" },
    seed: { type: "string", description: "Seed passed to load (default 0)" },
    ...envArgs,
  },
  async run({ args }) {
    const { definition, env } = await openEnv(args.id, args.args);
    if (!env.demonstrate)
      throw new EnvError(`env ${definition.id} has no demonstrations`, {
        fix: "implement demonstrate(task) in the env",
      });
    const tasks = (await env.load(split(args.split ?? "train"), integer(args.seed, "seed", 0))).slice(
      0,
      integer(args.n, "n", 100),
    );
    const tools = env.tools.map((t) => t.spec);
    const lines: string[] = [];
    for (const task of tasks) {
      const messages = await env.demonstrate(task);
      lines.push(
        JSON.stringify({ messages, ...(tools.length ? { tools } : {}), env: definition.id, task_id: task.id }),
      );
    }
    try {
      mkdirSync(dirname(resolve(args.out)), { recursive: true });
      writeFileSync(args.out, lines.join("\n") + (lines.length ? "\n" : ""));
    } catch (err) {
      throw new RlxError(`rlx env demos: cannot write ${args.out}: ${(err as Error).message}`, {
        fix: "give --out a file path in a folder you can write to",
      });
    }
    console.log(`wrote ${lines.length} demonstrations of ${definition.id} to ${args.out}`);
  },
});

export default defineCommand({
  meta: { name: "env", description: "Inspect environments: list, show tasks, run a tool, write demonstrations" },
  subCommands: { list, show, tool, demos },
});
