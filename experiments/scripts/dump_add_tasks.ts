// Dumps the exact inputs rlx's GRPO run on 2-digit addition sees, for the plain PyTorch loop in
// bench/reference/grpo_add.py (docs/results.md row 2g): the train tasks in the order rlx's sampler
// draws them (TaskSampler, seed 0, one env named "math" with group size 8) and the first eval
// tasks, each as its rendered prompt token ids (the real env, ChatRenderer and Tokenizer, rendered
// as src/rollout/driver.ts does: no tools, generation prompt added) with its gold answer, plus the tokenizer's
// stop ids. Reusing src/ rather than re-deriving it in Python is the point: the two loops must
// start from identical prompts, or a difference in learning could be a difference in inputs.
//
//   bun experiments/scripts/dump_add_tasks.ts MODEL_DIR OUT.json [--train N] [--eval N] [--seed S]
import { writeFileSync } from "node:fs";
import { createEnv, loadEnv } from "../../src/envs/index.ts";
import type { Task } from "../../src/envs/types.ts";
import { ConfigError } from "../../src/errors.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { TaskSampler, uniformEnv } from "../../src/orchestrator/task_sampler.ts";

const ENV_ARGS = { operations: ["+"], word_problems: false };

function rendered(renderer: ChatRenderer, task: Task): { id: string; prompt_ids: number[]; answer: string } {
  const r = renderer.render(task.prompt, { tools: [], addGenerationPrompt: true });
  return { id: task.id, prompt_ids: r.tokenIds, answer: task.answer ?? "" };
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const option = (name: string, fallback: number) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? Number(argv.splice(i, 2)[1]) : fallback;
  };
  const numTrain = option("train", 1280);
  const numEval = option("eval", 200);
  const seed = option("seed", 0);
  const [modelDir, outPath] = argv;
  if (!modelDir || !outPath)
    throw new ConfigError("usage: dump_add_tasks.ts MODEL_DIR OUT.json [--train N] [--eval N] [--seed S]", {
      fix: "give a model directory and an output path",
    });

  const tokenizer = Tokenizer.load(modelDir);
  const renderer = new ChatRenderer(tokenizer);
  const env = await createEnv(await loadEnv("math"), ENV_ARGS);
  const trainTasks = await env.load("train", seed);
  const evalTasks = (await env.load("eval", seed)).slice(0, numEval);
  const sampler = new TaskSampler(
    [uniformEnv({ name: "math", ratio: 1, groupSize: 8, tasks: trainTasks }, seed)],
    seed,
  );
  const train = Array.from({ length: numTrain }, () => rendered(renderer, sampler.next(1).task!));
  writeFileSync(
    outPath,
    JSON.stringify({
      env_args: ENV_ARGS,
      seed,
      stop_ids: tokenizer.stopIds,
      train,
      eval: evalTasks.map((task) => rendered(renderer, task)),
    }),
  );
  console.log(
    `${outPath}: ${train.length} train draws, ${evalTasks.length} eval tasks, stop ids ${tokenizer.stopIds.join(",")}`,
  );
}

await main();
