// The `forth` tool as the model sees it: one call runs one program on a fresh interpreter and
// returns the printed output followed by either the final stack or the error, e.g.
//
//   3 4 + .          ->  "7 \nstack: <0>"
//   1 2 3 .S         ->  "<3> 1 2 3 \nstack: <3> 1 2 3"
//   1 +              ->  "error: line 1, word +: stack underflow"
import type { ToolSpec } from "../../data/chat.ts";
import { stringArg } from "../tools.ts";
import type { Tool, ToolOutput } from "../types.ts";
import { DEFAULT_LIMITS, runForth, type ForthLimits, type ForthResult } from "./interpreter.ts";

export const FORTH_TOOL_SPEC: ToolSpec = {
  type: "function",
  function: {
    name: "forth",
    description:
      "Run a Forth program on a fresh interpreter (32-bit integers). Returns what it printed, then its final stack or its error.",
    parameters: {
      type: "object",
      properties: { code: { type: "string", description: 'Forth source, e.g. ": SQ DUP * ; 7 SQ ."' } },
      required: ["code"],
    },
  },
};

export function formatForthResult(result: ForthResult): string {
  let text = result.output;
  if (text.length > 0 && !text.endsWith("\n")) text += "\n";
  text += result.error
    ? `error: ${result.error}`
    : `stack: <${result.stack.length}>${result.stack.map((v) => ` ${v}`).join("")}`;
  return text;
}

export function forthTool(limits: ForthLimits = DEFAULT_LIMITS): Tool {
  return {
    spec: FORTH_TOOL_SPEC,
    run(args): ToolOutput {
      const code = stringArg(args, "code");
      if (typeof code !== "string") return { output: code.error, isError: true };
      const result = runForth(code, limits);
      return { output: formatForthResult(result), isError: result.error !== undefined };
    },
  };
}
