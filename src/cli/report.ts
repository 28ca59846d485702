// `rlx report RUN_DIR`: a self-contained HTML page of a run's curves (src/report/html.ts).
import { defineCommand } from "citty";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderReport } from "../report/html.ts";

export default defineCommand({
  meta: { name: "report", description: "Render a run directory's metrics.jsonl as a self-contained HTML page" },
  args: {
    run: { type: "positional", required: true, description: "Run directory (output_dir of rlx train)" },
    out: { type: "string", description: "Output HTML file (default RUN_DIR/report.html)" },
  },
  run({ args }) {
    const out = args.out ?? join(args.run, "report.html");
    writeFileSync(out, renderReport(args.run));
    console.log(out);
  },
});
