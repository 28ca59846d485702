// The command line is checked against the command's own flags before it runs: citty (like
// node:util's parseArgs under it, in non-strict mode) silently ignores a flag it does not know and
// a positional argument past the last one declared, so `rlx serve --api-kye X` would start an
// open server and `rlx train c.toml --nprocc 2` would train on one rank. Here every token is
// matched the way citty parses it (`--name`, `--name=value`, `--no-name`, a string flag takes the
// next token as its value, `--` ends the flags), and anything unknown is a UsageError naming it,
// with the closest known flag (or command) suggested.
import { type ArgsDef, type CommandDef } from "citty";
import { closest } from "../did_you_mean.ts";
import { UsageError } from "../errors.ts";

type Resolvable<T> = T | Promise<T> | (() => T | Promise<T>);
const resolve = async <T>(value: Resolvable<T>): Promise<T> =>
  typeof value === "function" ? await (value as () => T | Promise<T>)() : await value;

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const camel = (name: string) => name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** Throws a UsageError for the first unknown flag, command or extra argument of `rawArgs`. */
export async function checkCommandLine(cmd: CommandDef<any>, rawArgs: readonly string[], path = "rlx"): Promise<void> {
  const args = ((await resolve(cmd.args ?? {})) ?? {}) as ArgsDef;
  const subCommands = (await resolve(cmd.subCommands ?? {})) as Record<string, Resolvable<CommandDef<any>>>;
  const flags = new Map<string, "string" | "boolean">(); // after --
  const shorts = new Map<string, "string" | "boolean">(); // after - (one-letter aliases only, as citty)
  for (const [name, def] of Object.entries(args)) {
    if (def.type === "positional") continue;
    const type = def.type === "boolean" ? "boolean" : "string";
    const aliases = "alias" in def ? [def.alias ?? []].flat() : [];
    for (const alias of [name, kebab(name), camel(name), ...aliases]) flags.set(alias, type);
    for (const alias of aliases) if (alias.length === 1) shorts.set(alias, type);
  }
  const positionals = Object.entries(args).filter(([, def]) => def.type === "positional");
  const help = `see \`${path} --help\``;
  const given: string[] = [];
  for (let i = 0; i < rawArgs.length; i++) {
    const arg = rawArgs[i]!;
    if (arg === "--") {
      given.push(...rawArgs.slice(i + 1));
      break;
    }
    if (arg.startsWith("-") && arg !== "-") {
      const dashes = arg.startsWith("--") ? "--" : "-";
      const [name, value] = splitFlag(arg.slice(dashes.length));
      const negated = dashes === "--" && name.startsWith("no-") && flags.get(name.slice(3)) === "boolean";
      const type = negated ? "boolean" : (dashes === "--" ? flags : shorts).get(name);
      if (type === undefined) {
        const known = Object.keys(args)
          .filter((k) => args[k]!.type !== "positional")
          .map(kebab);
        throw new UsageError(`${path}: unknown flag ${arg.split("=")[0]}`, {
          fix: known.length ? `did you mean --${closest(name, known)}? (${help})` : `${path} takes no flags (${help})`,
        });
      }
      if (type === "string" && value === undefined) i++; // the next token is its value
      continue;
    }
    if (given.length === 0 && Object.keys(subCommands).length > 0) {
      const sub = subCommands[arg];
      if (sub === undefined) {
        throw new UsageError(`${path}: unknown command ${arg}`, {
          fix: `did you mean \`${path} ${closest(arg, Object.keys(subCommands))}\`? (${help})`,
        });
      }
      return checkCommandLine(await resolve(sub), rawArgs.slice(i + 1), `${path} ${arg}`);
    }
    given.push(arg);
  }
  // a last positional marked `variadic: true` takes every remaining argument (rlx report RUN...)
  const variadic = (positionals.at(-1)?.[1] as { variadic?: boolean } | undefined)?.variadic === true;
  if (given.length > positionals.length && !variadic) {
    throw new UsageError(`${path}: unexpected argument ${given[positionals.length]}`, {
      fix: positionals.length
        ? `${path} takes ${positionals.map(([name]) => name.toUpperCase()).join(" ")}; quote a value with spaces, and put flags as --name value (${help})`
        : `${path} takes no positional arguments (${help})`,
    });
  }
}

function splitFlag(flag: string): [string, string | undefined] {
  const eq = flag.indexOf("=");
  return eq < 0 ? [flag, undefined] : [flag.slice(0, eq), flag.slice(eq + 1)];
}
