// Which queued requests the batching engine (engine.ts) prefills together in one generator.add.
//
// A batch holds at most `free` requests (the free slots) and at most `maxPrefillTokens` prompt
// tokens to compute, so one admission does not stall the running sequences' decode steps for long;
// the first request always goes in, however long. A prompt that repeats one already in the batch
// costs nothing: the generator prefills each distinct prompt once and shares its K/V blocks with
// the repeats (native/src/generate.cpp). That is how an RL group arrives, n rollouts of one prompt,
// so a group whose prompt alone exceeds the budget (a 16k-token prompt against 8,192) is still
// admitted together and prefilled once, not once per rollout.

/** The number of requests at the head of `queue` to admit as one batch. */
export function prefillBatchSize(
  queue: readonly { request: { prompt: readonly number[] } }[],
  free: number,
  maxPrefillTokens: number,
): number {
  const distinct: (readonly number[])[] = [];
  let tokens = 0;
  let size = 0;
  for (; size < Math.min(free, queue.length); size++) {
    const prompt = queue[size]!.request.prompt;
    if (distinct.some((seen) => samePrompt(seen, prompt))) continue;
    if (size > 0 && tokens + prompt.length > maxPrefillTokens) break;
    tokens += prompt.length;
    distinct.push(prompt);
  }
  return size;
}

function samePrompt(a: readonly number[], b: readonly number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
