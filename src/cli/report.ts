// `rlx report RUN_DIR`: a self-contained HTML page of a run's curves.
import { defineCommand } from "citty";
import { NotBuiltError } from "../errors.ts";

export default defineCommand({
  meta: { name: "report", description: "Render a run directory's metrics as a self-contained HTML page" },
  args: {
    run: { type: "positional", required: true, description: "Run directory (output_dir of rlx train)" },
    out: { type: "string", description: "Output HTML file (default RUN_DIR/report.html)" },
  },
  run() {
    throw new NotBuiltError("rlx report is not built yet (runs do not write metrics.jsonl yet)");
  },
});
