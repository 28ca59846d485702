// `rlx report RUN_DIR [RUN_DIR ...]`: a self-contained HTML page of runs' curves, overlaid, and a
// viewer of their audited rollouts (src/report/html.ts).
import { type ArgDef, defineCommand } from "citty";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderReport } from "../report/html.ts";

export default defineCommand({
  meta: {
    name: "report",
    description:
      "Render runs' metrics.jsonl and audit records as one self-contained HTML page (several runs: overlaid)",
  },
  args: {
    run: {
      type: "positional",
      required: true,
      description: "Run directories (output_dir of rlx train or rlx sft), one or more",
      variadic: true,
    } as ArgDef,
    out: { type: "string", description: "Output HTML file (default FIRST_RUN_DIR/report.html)" },
  },
  run({ args }) {
    const dirs = args._.length ? args._ : [args.run];
    const out = args.out ?? join(dirs[0]!, "report.html");
    writeFileSync(out, renderReport(dirs));
    console.log(out);
  },
});
