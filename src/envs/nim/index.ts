// The `nim` environment: self-play in a two-player game with a checkable, zero-sum outcome
// (docs/algorithms.md, "Roles"). A pile of `n` stones; the players take 1 to `max_take` stones in
// turn, role `first` moving first; whoever takes the last stone wins (+1), the other loses (-1).
// A reply without a legal move loses at once. Each role sees only the position and the rules
// (its own prompt), so the same policy can play both sides, or one side against a frozen copy
// (`roles.second.source`). Example episode (n = 5, max_take = 3):
//
//   first  sees: "There are 5 stones. ... How many do you take?"   replies "1"   (4 left)
//   second sees: "There are 4 stones. ..."                         replies "3"   (1 left)
//   first  sees: "There is 1 stone. ..."                           replies "1"   -> first +1, second -1
//
// The winning move leaves a multiple of max_take + 1. `reward` (eval, one agent) scores one move:
// 1 when it is a winning move, 0 otherwise (tasks are drawn from positions that have one).
//
// `format = "bare"` is the lean prompt, `Take 1 to 3 stones from 13:` (~25 tokens instead of ~130),
// for a model whose chat template adds nothing (configs/templates/bare.jinja): the pile right
// before the reply.
import { z } from "zod";
import { Rng } from "../random.ts";
import type { EnvDefinition, EpisodeContext, EpisodeResult, Task } from "../types.ts";
import type { ChatMessage } from "../../data/chat.ts";

const Args = z.strictObject({
  /** Pile sizes are drawn from [min_pile, max_pile]. */
  min_pile: z.number().int().min(2).default(5),
  max_pile: z.number().int().min(2).default(15),
  max_take: z.number().int().min(1).default(3),
  train_size: z.number().int().positive().default(500),
  eval_size: z.number().int().positive().default(50),
  /** chat: "Nim: there are 13 stones left. Take 1 to 3 stones; ..." / bare: "Take 1 to 3 stones from 13:". */
  format: z.enum(["chat", "bare"]).default("chat"),
});
type NimArgs = z.infer<typeof Args>;

const ROLES = ["first", "second"] as const;

/** What a player sees: the pile and the rules. */
export function position(pile: number, maxTake: number, format: NimArgs["format"] = "chat"): ChatMessage[] {
  const take = Math.min(maxTake, pile);
  const content =
    format === "bare"
      ? `Take 1 to ${take} stones from ${pile}:`
      : `Nim: there ${pile === 1 ? "is 1 stone" : `are ${pile} stones`} left. Take 1 to ${take} stones; whoever takes the last stone wins. Reply with the number you take.`;
  return [{ role: "user", content }];
}

/** The move in a reply: its first integer, or undefined. */
export function parseMove(reply: string): number | undefined {
  const match = /-?\d+/.exec(reply);
  return match ? Number(match[0]) : undefined;
}

/** Plays one game; the winner +1, the loser -1. */
export async function playNim(
  ctx: EpisodeContext,
  pile: number,
  maxTake: number,
  format: NimArgs["format"] = "chat",
): Promise<EpisodeResult> {
  let left = pile;
  for (let move = 0; ; move++) {
    const mover = ROLES[move % 2]!;
    const other = ROLES[(move + 1) % 2]!;
    const take = parseMove(await ctx.turn(mover, position(left, maxTake, format)));
    const legal = take !== undefined && Number.isInteger(take) && take >= 1 && take <= Math.min(maxTake, left);
    if (legal) left -= take;
    if (!legal || left === 0) {
      const winner = legal ? mover : other;
      const rewards = { [winner]: 1, [winner === mover ? other : mover]: -1 };
      // the second player never moved when the first one's opening move was illegal
      if (move === 0) delete rewards.second;
      return { rewards, metrics: { first_wins: winner === "first" ? 1 : 0, illegal: legal ? 0 : 1, moves: move + 1 } };
    }
  }
}

function tasks(split: "train" | "eval", seed: number, a: NimArgs): Task[] {
  const rng = new Rng(seed * 31 + (split === "train" ? 1 : 2));
  const size = split === "train" ? a.train_size : a.eval_size;
  return Array.from({ length: size }, (_, i) => {
    let pile = a.min_pile + Math.floor(rng.next() * (a.max_pile - a.min_pile + 1));
    if (pile % (a.max_take + 1) === 0) pile++; // a position with a winning move
    return {
      id: `nim-${split}-${i}`,
      prompt: position(pile, a.max_take, a.format),
      answer: String(pile % (a.max_take + 1)),
      info: { pile },
    };
  });
}

const nim: EnvDefinition<NimArgs> = {
  id: "nim",
  description: "two-player Nim, self-play: roles first and second, zero-sum (+1 / -1)",
  args: Args,
  create(a) {
    if (a.max_pile < a.min_pile) throw new Error(`nim: max_pile ${a.max_pile} is below min_pile ${a.min_pile}`);
    return {
      tools: [],
      maxTurns: 1,
      roles: ROLES,
      load: async (split, seed) => tasks(split, seed, a),
      episode: (ctx) => playNim(ctx, ctx.task.info!.pile as number, a.max_take, a.format),
      reward(task, rollout) {
        const last = rollout.messages.at(-1);
        const move = parseMove(last?.role === "assistant" && typeof last.content === "string" ? last.content : "");
        const winning = move === Number(task.answer) ? 1 : 0;
        return { reward: winning, metrics: { winning_move: winning } };
      },
    };
  },
};

export default nim;
