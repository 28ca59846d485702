// Starts `rlx serve` as a real child process (the CLI entry point, as users run it) on a free port
// and returns its base URL once it prints its listening line. Not a test file itself.
import type { Subprocess } from "bun";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../..");

export interface ServeProcess {
  url: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** Everything the server printed so far (stdout and stderr). */
  output(): string;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number>;
}

export async function startServe(args: string[], timeoutMs = 30_000): Promise<ServeProcess> {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "serve", "--port", "0", ...args], {
    cwd: ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let text = "";
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) text += decoder.decode(chunk, { stream: true });
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  const deadline = Date.now() + timeoutMs;
  let url: string | undefined;
  while (url === undefined) {
    const match = /on (http:\/\/[^\s]+)\/v1/.exec(text);
    if (match) url = match[1];
    else if (proc.exitCode !== null || Date.now() > deadline)
      throw new Error(`rlx serve did not start (exit ${proc.exitCode}):\n${text}`);
    else await Bun.sleep(20);
  }
  return {
    url,
    proc,
    output: () => text,
    async stop() {
      proc.kill("SIGTERM");
      return await proc.exited;
    },
  };
}
