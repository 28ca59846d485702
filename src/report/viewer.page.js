// Browser code of `rlx report`: the rollout viewer over the audit records (rollouts/step_N.jsonl,
// docs/algorithms.md). Pick a run, step, env and algorithm, order by reward (worst or best
// first) or keep only failed samples (reward <= 0: a rollout that errored is never trained, so
// never audited). A sample's tokens are coloured by the credit each feeds (tokenColor below), its
// turns set apart (prompt, each assistant turn with its tool calls boxed, each tool output or
// observation), its group's rewards side by side.

const CREDIT = {
  pos: [22, 163, 74],
  neg: [220, 38, 38],
  ce: [37, 99, 235],
  kl: [147, 51, 234],
  distill: [234, 88, 12],
};

/**
 * A token's colour: an rl member (action token, rl weight != 0) by its advantage, green above 0
 * and red below, alpha 0.15 + 0.7 * |a| / (the sample's largest |a| on rl tokens); else a ce
 * member blue, a ref_kl member purple and a distill member (top-k distillation) orange, alpha
 * 0.15 + 0.7 * min(1, |weight|). Anything else has
 * no colour: "masked" (not an action, no weight) or "zeroed" (an action whose rl weight is 0).
 */
function tokenColor(sample, t, maxAdv) {
  const rl = sample.rl ? sample.rl[t] : 1;
  const alpha = (x) => Number((0.15 + 0.7 * Math.min(1, Math.abs(x))).toFixed(3));
  const rgba = (c, a) => `rgba(${c[0]}, ${c[1]}, ${c[2]}, ${a})`;
  if (sample.mask[t] === 1 && rl !== 0) {
    const a = sample.adv[t];
    if (a === 0) return { kind: "rl0" };
    return { kind: "rl", color: rgba(a > 0 ? CREDIT.pos : CREDIT.neg, alpha(maxAdv > 0 ? a / maxAdv : 0)) };
  }
  const ce = sample.ce ? sample.ce[t] : 0;
  if (ce !== 0) return { kind: "ce", color: rgba(CREDIT.ce, alpha(ce)) };
  const kl = sample.kl ? sample.kl[t] : 0;
  if (kl !== 0) return { kind: "kl", color: rgba(CREDIT.kl, alpha(kl)) };
  const distill = sample.distill ? sample.distill[t] : 0;
  if (distill !== 0) return { kind: "distill", color: rgba(CREDIT.distill, alpha(distill)) };
  return { kind: sample.mask[t] === 1 ? "zeroed" : "masked" };
}

function maxRlAdvantage(sample) {
  let max = 0;
  sample.mask.forEach((m, t) => {
    if (m === 1 && (sample.rl ? sample.rl[t] : 1) !== 0) max = Math.max(max, Math.abs(sample.adv[t]));
  });
  return max;
}

/** The sample cut into turns: the prompt, then alternating assistant turns and observations. */
function turns(sample) {
  const out = [];
  let acted = false;
  sample.mask.forEach((m, t) => {
    acted = acted || m === 1;
    const kind = m === 1 ? "assistant" : acted ? "observation" : "prompt";
    const last = out[out.length - 1];
    if (last && last.kind === kind) last.tokens.push(t);
    else out.push({ kind, tokens: [t] });
  });
  return out;
}

function tokenText(run, id) {
  return id in run.vocab ? run.vocab[id] : `⟨${id}⟩`;
}

function renderTurn(run, sample, turn, maxAdv) {
  const block = document.createElement("div");
  const text = turn.tokens.map((t) => tokenText(run, sample.ids[t])).join("");
  const label =
    turn.kind === "observation" && /tool_response|<\|im_start\|>tool/.test(text) ? "tool output" : turn.kind;
  block.className = `turn ${label.replace(" ", "-")}`;
  const head = document.createElement("div");
  head.className = "turn-label";
  head.textContent = label;
  block.appendChild(head);
  let seen = "";
  let inCall = false;
  let call = null;
  for (const t of turn.tokens) {
    const piece = tokenText(run, sample.ids[t]);
    seen += piece;
    const opens = turn.kind === "assistant" && !inCall && seen.endsWith("<tool_call>");
    const span = document.createElement("span");
    span.className = "tok";
    span.dataset.t = String(t);
    span.textContent = piece;
    const credit = tokenColor(sample, t, maxAdv);
    span.classList.add(credit.kind);
    if (credit.color) span.style.backgroundColor = credit.color;
    span.title =
      `#${t} id ${sample.ids[t]} | mask ${sample.mask[t]} | adv ${sample.adv[t]}` +
      (sample.rl ? ` | rl ${sample.rl[t]}` : "") +
      (sample.ce ? ` | ce ${sample.ce[t]}` : "") +
      (sample.kl ? ` | ref_kl ${sample.kl[t]}` : "") +
      (sample.distill ? ` | distill ${sample.distill[t]}` : "");
    if (opens) {
      inCall = true;
      call = document.createElement("span");
      call.className = "tool-call";
      block.appendChild(call);
    }
    (inCall ? call : block).appendChild(span);
    if (inCall && seen.endsWith("</tool_call>")) inCall = false;
  }
  return block;
}
