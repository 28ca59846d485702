// The orchestrator's view of the trainer's progress: it polls the run directory for published
// weights (src/rundir/paths.ts: a `weights/step_N/` is whole once its marker exists), moves the
// policy to the newest (loaded from the directory, or received over the weight channels when the
// marker says so), runs the due eval on it, and hands each step's marker to the metrics log in
// step order. The step loop waits on it for its async bound.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PUBLISHED_MARKER, type PublishedStep, weightsDir } from "../rundir/paths.ts";
import type { LivePolicy } from "../processes/live_policy.ts";

/**
 * Watches `weights/step_N/published.json` markers: hands each step's trainer metrics to
 * `onPublished` (in step order) and moves the policy to the newest published weights.
 */
export class WeightWatcher {
  private published: number;
  private readonly waiters: Array<{ version: number; resolve: () => void; reject: (err: Error) => void }> = [];
  private readonly timer: ReturnType<typeof setInterval>;
  private busy = false;
  private error: Error | undefined;

  constructor(
    private readonly runDir: string,
    private readonly policy: LivePolicy,
    start: number,
    private readonly onPublished: (step: number, published: PublishedStep, extra: Record<string, number>) => void,
    /** Runs once the policy serves a new version, before any newer one is loaded (the eval). */
    private readonly afterLoad: (version: number) => Promise<Record<string, number>>,
    pollMs = 25,
  ) {
    this.published = start;
    this.timer = setInterval(() => void this.poll(), pollMs);
  }

  /** Resolves once weights `version` (or newer) are published and loaded into the policy. */
  waitFor(version: number): Promise<void> {
    if (this.error) return Promise.reject(this.error);
    if (this.published >= version) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ version, resolve, reject }));
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async poll(): Promise<void> {
    if (this.busy || this.error) return;
    this.busy = true;
    try {
      const markers: PublishedStep[] = [];
      for (let step = this.published + 1; existsSync(join(weightsDir(this.runDir, step), PUBLISHED_MARKER)); step++) {
        markers.push(
          JSON.parse(readFileSync(join(weightsDir(this.runDir, step), PUBLISHED_MARKER), "utf8")) as PublishedStep,
        );
      }
      const newest = markers.at(-1);
      if (!newest) return;
      const reloadStart = performance.now();
      // over the weight channels the trainer sends every step, and each is received in turn (it
      // waits for the receive before it writes the next marker, so there is one); from disk only
      // the newest is loaded
      if (newest.transfer === "c10d") for (const marker of markers) await this.policy.receive(marker.step);
      else await this.policy.load(resolve(weightsDir(this.runDir, newest.step)), newest.step);
      const reloadSeconds = (performance.now() - reloadStart) / 1000;
      this.published = newest.step;
      const extra = { "time/reload": reloadSeconds, ...(await this.afterLoad(newest.step)) };
      for (const marker of markers) this.onPublished(marker.step, marker, marker === newest ? extra : {});
      for (const waiter of this.waiters.splice(0)) {
        if (this.published >= waiter.version) waiter.resolve();
        else this.waiters.push(waiter);
      }
    } catch (err) {
      this.error = err as Error;
      for (const waiter of this.waiters.splice(0)) waiter.reject(this.error);
    } finally {
      this.busy = false;
    }
  }
}
