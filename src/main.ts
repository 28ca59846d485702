import { runMain } from "./cli/run.ts";
import { root } from "./cli/root.ts";

await runMain(root);
