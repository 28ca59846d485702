// The `rlx` command: subcommands are imported lazily, so `rlx --help` and config errors never
// load libtorch or the tokenizer.
import { defineCommand } from "citty";
import pkg from "../../package.json" with { type: "json" };

export const root = defineCommand({
  meta: {
    name: "rlx",
    version: pkg.version,
    description: "RL post-training for language models: one binary over libtorch",
  },
  subCommands: {
    train: () => import("./train.ts").then((m) => m.default),
    trainer: () => import("./trainer.ts").then((m) => m.default),
    eval: () => import("./eval.ts").then((m) => m.default),
    serve: () => import("./serve.ts").then((m) => m.default),
    init: () => import("./init.ts").then((m) => m.default),
    sft: () => import("./sft.ts").then((m) => m.default),
    env: () => import("./env.ts").then((m) => m.default),
    report: () => import("./report.ts").then((m) => m.default),
    doctor: () => import("./doctor.ts").then((m) => m.default),
    check: () => import("./check.ts").then((m) => m.default),
    plan: () => import("./plan.ts").then((m) => m.default),
    push: () => import("./push.ts").then((m) => m.default),
    replay: () => import("./replay.ts").then((m) => m.default),
    launch: () => import("./launch.ts").then((m) => m.default),
  },
});
