// `[hub]`: published steps pushed to a Hugging Face Hub repo while the run trains (every
// `interval` steps and the last), with src/hub/push.ts, one commit per step. A push runs in the
// background, one at a time; a step due while one is in flight waits, and a newer due step replaces
// it (the Hub only needs the newest). The files of a step are hard-linked under hub/step_N first,
// so the trainer pruning weights/step_N mid-upload takes nothing from the push. A push the Hub
// refuses is a warning, never the end of the run: the staged step stays on disk, and the warning
// gives the `rlx push` command that retries it. The run waits for the last step's push before it ends.
import { linkSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ResolvedConfig } from "../config/resolve.ts";
import { ConfigError, formatError } from "../errors.ts";
import { filesToPush, pushModel } from "../hub/push.ts";
import { weightsDir } from "../rundir/paths.ts";

export class HubSync {
  private running: Promise<void> = Promise.resolve();
  private pending: number | undefined;
  private busy = false;

  private constructor(
    private readonly config: ResolvedConfig,
    private readonly runDir: string,
    private readonly token: string,
    private readonly print: (line: string) => void,
    private readonly warn: (line: string) => void,
  ) {}

  /** Undefined when no [hub] repo is set; a ConfigError when its token is missing (before any step runs). */
  static open(
    config: ResolvedConfig,
    runDir: string,
    print: (line: string) => void,
    warn: (line: string) => void,
  ): HubSync | undefined {
    const hub = config.hub;
    if (!hub.repo) return undefined;
    const token = process.env[hub.token_var];
    if (!token)
      throw new ConfigError(
        `hub.repo is set but $${hub.token_var} is not: pushing needs a Hub token with write access`,
        {
          fix: `export ${hub.token_var}=hf_... , name another variable in hub.token_var, or drop hub.repo`,
        },
      );
    return new HubSync(config, runDir, token, print, warn);
  }

  /** A step was published: pushes it if it is due. */
  published(step: number): void {
    if (step % this.config.hub.interval !== 0 && step !== this.config.max_steps) return;
    this.pending = step;
    if (!this.busy) this.running = this.drain();
  }

  /** Resolves once every due push has finished (or failed with its warning). */
  finished(): Promise<void> {
    return this.running;
  }

  private async drain(): Promise<void> {
    this.busy = true;
    while (this.pending !== undefined) {
      const step = this.pending;
      this.pending = undefined;
      await this.push(step);
    }
    this.busy = false;
  }

  private async push(step: number): Promise<void> {
    const hub = this.config.hub;
    const source = weightsDir(this.runDir, step);
    const staged = join(this.runDir, "hub", `step_${step}`);
    try {
      rmSync(staged, { recursive: true, force: true });
      for (const file of filesToPush(source)) {
        mkdirSync(join(staged, file.path, ".."), { recursive: true });
        linkSync(join(source, file.path), join(staged, file.path));
      }
      const result = await pushModel({
        dir: staged,
        repo: hub.repo!,
        token: this.token,
        hubUrl: hub.url ?? process.env.HF_ENDPOINT,
        private: hub.private,
        message: `rlx train: step ${step} of ${this.runDir}`,
      });
      rmSync(staged, { recursive: true, force: true });
      this.print(
        `hub: step ${step} pushed to ${result.url} (${(result.bytes / 2 ** 20).toFixed(1)} MiB, commit ${result.commit.slice(0, 12)})`,
      );
    } catch (err) {
      this.warn(
        `hub: pushing step ${step} to ${hub.repo} failed, the run goes on: ${formatError(err)}\n  retry: rlx push ${staged} --repo ${hub.repo}`,
      );
    }
  }
}
