// `rlx trainer`: the trainer process of a run (src/trainer/process.ts). Internal: `rlx train`
// starts it with the run directory, whose config.resolved.toml is its whole configuration, so
// the trainer and the orchestrator cannot disagree about a setting.
import { join } from "node:path";
import { defineCommand } from "citty";
import { loadConfig } from "../config/load.ts";

export default defineCommand({
  meta: { name: "trainer", description: "Internal: the trainer process `rlx train` starts (reads RUN_DIR/config.resolved.toml)" },
  args: {
    "run-dir": { type: "string", required: true, description: "The run directory (output_dir of the run)" },
    "resume-from": { type: "string", description: "Checkpoint directory to restore weights and optimizer state from" },
    "parent-pid": { type: "string", description: "Exit when this process is gone" },
  },
  async run({ args }) {
    const { runTrainer } = await import("../trainer/process.ts");
    const runDir = args["run-dir"];
    const { config } = loadConfig(join(runDir, "config.resolved.toml"));
    await runTrainer({
      runDir,
      config,
      ...(args["resume-from"] ? { resumeFrom: args["resume-from"] } : {}),
      ...(args["parent-pid"] ? { parentPid: Number(args["parent-pid"]) } : {}),
    });
  },
});
