// Python's str.strip / lstrip / rstrip for chat templates run by @huggingface/jinja (0.5.11, the
// latest release), whose versions ignore their argument and strip all whitespace. Qwen3's
// template calls `content.lstrip('\n')` and `reasoning_content.strip('\n')`, so an assistant turn
// starting with a space rendered differently from transformers (python3-jinja2), which the golden
// renders caught (test/unit/model/golden_render.test.ts).
//
// The library does not export its string value class, so this takes it from a probe value and
// wraps the getter of its per-instance method table once, at import: `s.strip(chars)` strips the
// characters of `chars`; with no argument (or none) it strips whitespace as before.
import { Environment } from "@huggingface/jinja";

type Runtime = { value: unknown; builtins: Map<string, unknown> };
type Ctor = new (value: unknown) => Runtime;

function stripChars(text: string, chars: string, start: boolean, end: boolean): string {
  let a = 0;
  let b = text.length;
  if (start) while (a < b && chars.includes(text[a]!)) a++;
  if (end) while (b > a && chars.includes(text[b - 1]!)) b--;
  return text.slice(a, b);
}

function patch(): void {
  const env = new Environment();
  env.set("probe", "x");
  const probe = env.lookupVariable("probe") as unknown as Runtime;
  const StringValue = probe.constructor as Ctor;
  const FunctionValue = (probe.builtins.get("upper") as object).constructor as new (
    fn: (args: Runtime[]) => Runtime,
  ) => unknown;
  const original = Object.getOwnPropertyDescriptor(StringValue.prototype, "builtins");
  if (!original?.get) throw new Error("@huggingface/jinja: StringValue.builtins is not a getter (library changed)");
  const patched = new WeakSet<object>();
  Object.defineProperty(StringValue.prototype, "builtins", {
    configurable: true,
    get(this: Runtime) {
      const table = original.get!.call(this) as Map<string, unknown>;
      if (patched.has(table)) return table;
      patched.add(table);
      for (const [name, start, end] of [
        ["strip", true, true],
        ["lstrip", true, false],
        ["rstrip", false, true],
      ] as const) {
        const builtin = table.get(name);
        table.set(
          name,
          new FunctionValue((args) => {
            const chars = args[0]?.value;
            if (typeof chars !== "string") return (builtin as { value: (a: Runtime[]) => Runtime }).value(args);
            return new StringValue(stripChars(String(this.value), chars, start, end));
          }),
        );
      }
      return table;
    },
  });
}

patch();
