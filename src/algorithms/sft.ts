// SFT as hard distillation: rollouts are sampled by a frozen model (`sampling.source`, required),
// and every token it sampled is a cross-entropy target (ce weight 1, no advantage):
//
//   l_ce = -log pi(y_t | y_<t),   normalized by the step's ce token count
//
// There are no hooks: the routing stamp (routing.ts) does all the work. Rejection sampling by
// reward, if wanted, belongs to the data (or a custom algorithm), not here. The frozen source's
// tokens never go stale, and their logprobs are not used (ce has no importance ratio).
import type { z, ZodType } from "zod";
import { algoSchemas } from "../config/algo.ts";
import { Algorithm, type LossComponent } from "./base.ts";

export class Sft extends Algorithm<z.infer<typeof algoSchemas.sft>> {
  static override type = "sft";
  static override actionLossType: LossComponent = "ce";
  static override schema: ZodType = algoSchemas.sft;
}
