// Where a weight reload's new weights come from (Engine.reloadWeights and receiveWeights): a
// published directory on disk, or a transfer arriving over a weight channel (src/native/weights.ts).
// Either way the engine gets what to swap in only once it is whole: a new model, or (a LoRA adapter
// for the served base) a function that copies the adapter into the served model in place.
import { serveAdapters } from "../model/adapter.ts";
import type { NativeModel } from "../native/model.ts";
import type { WeightReceiver } from "../native/weights.ts";
import { loadSameArchitecture } from "./limits.ts";

/** keepReplaced: the model this one replaces goes back to the source for its next fetch. */
export type Fetched = { model: NativeModel; keepReplaced?: boolean } | { swap: () => void };

export interface WeightSource {
  /** Whether fetch() can run now: always for a directory; for a transfer, once it arrived (or failed). */
  ready(): boolean;
  /** The new weights for the served model `served`; throws what made them unusable. */
  fetch(served: NativeModel): Promise<Fetched>;
  /** The directory the weights come from (absent: a transfer). */
  dir?: string;
}

/** A published directory: an adapter copied in place when it fits the served model, else loaded whole. */
export function directorySource(
  dir: string,
  load: (dir: string) => Promise<NativeModel>,
  adapterSwap: (served: NativeModel, dir: string) => Promise<(() => void) | null>,
): WeightSource {
  return {
    dir,
    ready: () => true,
    async fetch(served) {
      const swap = await adapterSwap(served, dir);
      return swap ? { swap } : { model: await loadSameArchitecture(dir, served, load) };
    },
  };
}

/**
 * A transfer over `receiver` into a model shaped like the served one, started when the engine
 * first asks whether it is ready (when it heads the engine's reloads); the receiver's thread
 * receives it while the engine keeps decoding. `retired()` hands over the model the last transfer
 * replaced, if the engine kept one, to be received into (its memory is already mapped). A LoRA
 * model receives only its adapters, copied into the served model in place.
 */
export function channelSource(
  receiver: WeightReceiver,
  served: () => NativeModel,
  retired: () => NativeModel | undefined,
  version: number,
): WeightSource {
  let started = false;
  let failure: Error | undefined;
  return {
    ready() {
      try {
        if (!started) {
          const like = served();
          // a base model gets empty adapters (B = 0) of the run's shape as the first ones arrive
          if (receiver.lora) serveAdapters(like, receiver.lora);
          receiver.start(like, version, like.lora ? undefined : retired());
        }
        started = true;
        return receiver.poll() !== "busy";
      } catch (err) {
        failure = err as Error;
        return true;
      }
    },
    async fetch(like) {
      if (failure) throw failure;
      if (like.lora) return { swap: () => receiver.takeAdapters(like) };
      return { model: receiver.take(like), keepReplaced: true };
    },
  };
}
