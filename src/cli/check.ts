// `rlx check RUN_DIR`: verifies a run directory offline (src/rundir/verify.ts): every checkpoint,
// model directory and step file against the sizes and CRC-32s recorded when it was written, and
// metrics.jsonl. Prints one line per item and exits 1 when anything is damaged, so a script can
// check a run copied between machines before resuming it.
import { defineCommand } from "citty";
import { existsSync } from "node:fs";
import { ConfigError } from "../errors.ts";

export default defineCommand({
  meta: {
    name: "check",
    description: "Verify a run directory offline: checkpoints, weights and step files against their checksums",
  },
  args: {
    run: { type: "positional", required: true, description: "Run directory (output_dir of rlx train or rlx sft)" },
    json: { type: "boolean", description: "Print one JSON object" },
  },
  async run({ args }) {
    if (!existsSync(args.run)) throw new ConfigError(`rlx check: no directory ${args.run}`);
    const { checkRunDir } = await import("../rundir/verify.ts");
    const items = checkRunDir(args.run);
    const damaged = items.filter((item) => item.status === "damaged");
    if (args.json) console.log(JSON.stringify({ run: args.run, ok: damaged.length === 0, items }, null, 1));
    else {
      for (const item of items)
        console.log(
          `${item.status.padEnd(8)}${item.path}${item.problems.length ? `: ${item.problems.join("; ")}` : ""}`,
        );
      console.log(
        damaged.length
          ? `${damaged.length} of ${items.length} damaged; rlx train --resume skips a damaged checkpoint for the newest whole one before it`
          : `${items.length} checked, none damaged`,
      );
    }
    if (damaged.length) process.exitCode = 1;
  },
});
