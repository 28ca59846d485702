// Runs a citty command tree with rlx's error policy: an RlxError (bad config, bad input, a
// failed endpoint) prints its message and fix, no stack trace, exit 1; anything else is a bug
// and prints its stack. An unknown flag or extra argument is an error before anything runs
// (strict.ts). `--help` anywhere shows the usage of the deepest subcommand named.
import { type CommandDef, runCommand, showUsage } from "citty";
import { formatError, RlxError } from "../errors.ts";
import { checkCommandLine } from "./strict.ts";

async function deepest(
  cmd: CommandDef<any>,
  rawArgs: string[],
): Promise<[CommandDef<any>, CommandDef<any> | undefined]> {
  let parent: CommandDef<any> | undefined;
  for (const arg of rawArgs) {
    const subs = typeof cmd.subCommands === "function" ? await cmd.subCommands() : await cmd.subCommands;
    const loader = subs?.[arg];
    if (!loader) break;
    parent = cmd;
    cmd = await (typeof loader === "function" ? (loader as () => Promise<CommandDef<any>>)() : loader);
  }
  return [cmd, parent];
}

/** Values of a repeatable flag (`--set a=1 --set b=2`); citty keeps only the last. */
export function repeated(rawArgs: readonly string[], flag: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < rawArgs.length; i++) {
    const arg = rawArgs[i]!;
    if (arg === flag && i + 1 < rawArgs.length) values.push(rawArgs[++i]!);
    else if (arg.startsWith(`${flag}=`)) values.push(arg.slice(flag.length + 1));
  }
  return values;
}

export async function runMain(cmd: CommandDef<any>, rawArgs = process.argv.slice(2)): Promise<void> {
  try {
    if (rawArgs.includes("--help") || rawArgs.includes("-h") || rawArgs.length === 0) {
      const [sub, parent] = await deepest(
        cmd,
        rawArgs.filter((a) => !a.startsWith("-")),
      );
      await showUsage(sub, parent);
      return;
    }
    if (rawArgs.length === 1 && (rawArgs[0] === "--version" || rawArgs[0] === "-v")) {
      const meta = typeof cmd.meta === "function" ? await cmd.meta() : await cmd.meta;
      console.log(meta?.version ?? "unknown");
      return;
    }
    await checkCommandLine(cmd, rawArgs);
    await runCommand(cmd, { rawArgs });
  } catch (err) {
    if (err instanceof RlxError) {
      console.error(`error: ${formatError(err)}`);
    } else if ((err as Error)?.name === "CLIError") {
      // citty's own argument errors (a missing positional, a bad enum value)
      console.error(
        `error: ${(err as Error).message}\n  fix: see \`rlx ${rawArgs.filter((a) => !a.startsWith("-"))[0] ?? ""} --help\``,
      );
    } else {
      console.error(err);
    }
    process.exit(1);
  }
}
