// The audit record of rollouts/step_N.jsonl: one line per trained sample, enough to re-derive
// which tokens trained which component with what credit, read back with its schema.
import { expect, test } from "bun:test";
import { finishGroup } from "../../../src/algorithms/base.ts";
import { Grpo } from "../../../src/algorithms/grpo.ts";
import { assignRefLogprobs } from "../../../src/algorithms/routing.ts";
import { auditLine, parseAudit } from "../../../src/rundir/audit.ts";
import { rolloutToSamples } from "../../../src/algorithms/samples.ts";
import { singleTurn } from "../../fixtures/rollouts.ts";

test("a grpo and an opd sample round-trip through JSONL with exactly the streams they carry", async () => {
  const group = [
    singleTurn(1, 2, 2, { groupId: "g7", policyVersion: 3 }),
    singleTurn(0, 2, 2, { groupId: "g7", policyVersion: 3 }),
  ];
  await finishGroup(new Grpo(Grpo.schema.parse({ type: "grpo" })), group);
  const opd = singleTurn(0.5, 2, 2, { env: "search" });
  assignRefLogprobs(opd, [0, -1, -2, -3]);
  opd.advantage = null;
  const text =
    auditLine({
      step: 4,
      algo: "grpo",
      rollout: group[0]!,
      sample: rolloutToSamples(group[0]!, "rl")[0]!,
      sampleIndex: 0,
    }) + auditLine({ step: 4, algo: "opd", rollout: opd, sample: rolloutToSamples(opd, "ref_kl")[0]!, sampleIndex: 0 });
  expect(text.split("\n")).toHaveLength(3); // two lines and the final newline
  const [grpo, distill] = parseAudit(text);
  expect(grpo).toEqual({
    step: 4,
    env: "math",
    algo: "grpo",
    group_id: "g7",
    rollout_id: group[0]!.id,
    task_id: "t0",
    sample_index: 0,
    policy_version: 3,
    reward: 1,
    advantage: 0.5,
    token_ids: [10, 11, 12, 13],
    loss_mask: [0, 0, 1, 1],
    advantages: [0, 0, 0.5, 0.5],
    inference_logprobs: [0, 0, -0.5, -0.5],
    temperatures: [1, 1, 1, 1],
  });
  expect(distill).toMatchObject({
    env: "search",
    algo: "opd",
    advantage: null,
    rl_weights: [0, 0, 0, 0],
    ref_kl_weights: [0, 0, 1, 1],
    ref_logprobs: [0, 0, -2, -3],
  });
  expect(distill!.ce_weights).toBeUndefined();
  expect(() => parseAudit('{"step": 1}\n')).toThrow();
});
