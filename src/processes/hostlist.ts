// Slurm's hostlist syntax, expanded: `node[01-04]` is node01..node04 (a range keeps its lower
// bound's zero padding), `n[1-3,7],gpu5` is n1 n2 n3 n7 gpu5, and `r[1-2]-n[1-2]` is every
// combination, in order. `rlx trainer` takes the first host of SLURM_JOB_NODELIST as the address of
// rank 0's store (src/processes/launch_env.ts): Slurm's block distribution puts task 0 there.
import { ConfigError } from "../errors.ts";

/** Top-level names: split at commas outside brackets. */
function splitTop(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (c === "[") depth++;
    else if (c === "]") depth--;
    if (depth < 0 || depth > 1) throw new ConfigError(`hostlist ${list}: unbalanced brackets`);
    if (c === "," && depth === 0) {
      parts.push(list.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) throw new ConfigError(`hostlist ${list}: unbalanced brackets`);
  parts.push(list.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p.length > 0);
}

/** The values of one bracket's body, e.g. "01-03,7" -> 01 02 03 7. */
function rangeValues(body: string, list: string): string[] {
  const out: string[] = [];
  for (const item of body.split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(item.trim());
    if (!m) throw new ConfigError(`hostlist ${list}: [${body}] is not a list of numbers and ranges like 01-04,7`);
    const low = m[1]!;
    const high = m[2] ?? low;
    if (Number(high) < Number(low)) throw new ConfigError(`hostlist ${list}: range ${item} runs backwards`);
    for (let v = Number(low); v <= Number(high); v++) out.push(String(v).padStart(low.length, "0"));
  }
  return out;
}

/** One name with brackets, every combination in order. */
function expandName(name: string, list: string): string[] {
  const open = name.indexOf("[");
  if (open < 0) return [name];
  const close = name.indexOf("]", open);
  const head = name.slice(0, open);
  const rest = expandName(name.slice(close + 1), list);
  return rangeValues(name.slice(open + 1, close), list).flatMap((v) => rest.map((tail) => head + v + tail));
}

/** Every host of a Slurm hostlist, in order (duplicates kept, as Slurm lists them). */
export function expandHostlist(list: string): string[] {
  const hosts = splitTop(list).flatMap((name) => expandName(name, list));
  if (hosts.length === 0) throw new ConfigError(`hostlist "${list}" names no host`);
  return hosts;
}
