// Shared by the weight-transfer tests: a weight channel with both ends in this process (the
// receiver starts joining on its native thread, then rank 0 joins, blocking), and waiting for a
// receiver to settle. Not a test file itself.
import { ProcessGroup } from "../../src/native/dist.ts";
import { WeightReceiver } from "../../src/native/weights.ts";
import { freePort } from "../../src/processes/trainer_ranks.ts";

/** Both ends of a fresh channel on a free loopback port; `cleanup` gets what closes them. */
export async function openChannel(cleanup: Array<() => void>, timeoutMs: number) {
  const port = freePort("127.0.0.1");
  const receiver = await WeightReceiver.open({ host: "127.0.0.1", port, timeoutMs });
  cleanup.push(() => receiver.close());
  const sender = await ProcessGroup.create({
    rank: 0,
    worldSize: 2,
    store: { type: "tcp", host: "127.0.0.1", port },
    timeoutMs,
  });
  cleanup.push(() => sender.free());
  return { receiver, sender };
}

/** Polls until the receiver is no longer busy: "ready" or "idle" (throws a failed transfer). */
export async function untilSettled(receiver: WeightReceiver): Promise<string> {
  for (;;) {
    const state = receiver.poll();
    if (state !== "busy") return state;
    await Bun.sleep(1);
  }
}
