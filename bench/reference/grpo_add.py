"""A plain PyTorch GRPO loop on 2-digit addition, to compare learning per step with rlx
(docs/results.md row 2g, experiment 2): the calibration recipe, written the way a PyTorch user
would, on the same model, prompts and task order as rlx's run (docs/results.md row 2e).

Run with Debian's python (/usr/bin/python3, torch 1.13):

  bun experiments/scripts/dump_add_tasks.ts runs/learns/student-low runs/learns/ref-grpo-low/tasks.json
  /usr/bin/python3 bench/reference/grpo_add.py --model runs/learns/student-low \
      --tasks runs/learns/ref-grpo-low/tasks.json --out runs/learns/ref-grpo-low/results.json \
      --check-rollouts runs/learns/grpo-low-s0/rollouts/step_1.jsonl

Each step: the next 32 train tasks of rlx's sampler order x 8 samples at temperature 1 (48 new
tokens at most, the stop token included and trained on, as in rlx), binary reward (the math env's
answer check, re-implemented below and checked against rlx's own rewards with --check-rollouts),
A = r - mean over the group, loss = -sum(A * logp) / (completion tokens of all 256 samples),
fully on-policy (ratio 1), one AdamW step (lr 1e-4, no weight decay) after clipping the grad norm
at 1. Held-out greedy pass@1 on the first 100 eval tasks every 5 steps (rlx's eval-100), and on
all 200 at the first and last step (rlx's eval-200).

The model is train_step.py's forward (packed row, per-sample causal attention) and generate.py's
KV-cache step; only the HF weight names are mapped here. Samples whose advantage is 0 (their group
got 8 equal rewards) are skipped in the forward: they add nothing to the loss, but their tokens
still count in the denominator, as the calibration's plain mean over the batch does.
"""
import argparse
import json
import re
import struct
import time

import torch
import torch.nn.functional as F

from generate import step as decode_step
from train_step import forward, leaves

TEMPLATE_SPECIALS = {256: "<|endoftext|>", 257: "<|im_start|>", 258: "<|im_end|>"}


def load_student(model_dir):
    """The HF-layout model (config.json + model.safetensors, f32) as train_step.py's param dict."""
    cfg = json.load(open(f"{model_dir}/config.json"))
    cfg["qk_norm"] = True  # Qwen3 always has q/k norm
    with open(f"{model_dir}/model.safetensors", "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "F32", f"{name}: {meta['dtype']} (only f32 students are read here)"
        start, end = meta["data_offsets"]
        tensors[name] = torch.frombuffer(bytearray(data[start:end]), dtype=torch.float32).view(meta["shape"])
    leaf = lambda name: tensors[name].clone().requires_grad_()
    p = {"embed": leaf("model.embed_tokens.weight"), "norm": leaf("model.norm.weight"), "layers": []}
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        p["layers"].append({
            "in_norm": leaf(pre + "input_layernorm.weight"), "q": leaf(pre + "self_attn.q_proj.weight"),
            "k": leaf(pre + "self_attn.k_proj.weight"), "v": leaf(pre + "self_attn.v_proj.weight"),
            "o": leaf(pre + "self_attn.o_proj.weight"), "post_norm": leaf(pre + "post_attention_layernorm.weight"),
            "gate": leaf(pre + "mlp.gate_proj.weight"), "up": leaf(pre + "mlp.up_proj.weight"),
            "down": leaf(pre + "mlp.down_proj.weight"), "q_norm": leaf(pre + "self_attn.q_norm.weight"),
            "k_norm": leaf(pre + "self_attn.k_norm.weight")})
    p["lm_head"] = p["embed"] if cfg["tie_word_embeddings"] else leaf("lm_head.weight")
    return cfg, p


# --- reward: src/envs/answer.ts gradeReply(finalReply(...), gold, numeric=True) ---------------

def decode(ids):
    out, buf = [], bytearray()
    for i in ids:
        if i < 256:
            buf.append(i)
        else:
            out.append(buf.decode("utf-8", errors="replace"))
            buf = bytearray()
            out.append(TEMPLATE_SPECIALS.get(i, ""))
    out.append(buf.decode("utf-8", errors="replace"))
    return "".join(out)


def last_boxed(text):
    start = text.rfind("\\boxed{")
    if start == -1:
        return None
    depth = 0
    for i in range(start + len("\\boxed"), len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + len("\\boxed{"):i]
    return None


def extract_answer(text):
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    for line in reversed(lines):
        m = re.match(r"^(?:final\s+)?answer\s*[:=]\s*(.+)$", re.sub(r"^[*_#\s]+", "", line), re.I)
        if m:
            return m.group(1).strip()
    return lines[-1] if lines else None


def parse_integer(answer):
    cleaned = re.sub(r"\.$", "", re.sub(r"[,$\s]", "", answer))
    if re.fullmatch(r"[-+]?\d+", cleaned):
        return int(cleaned)
    numbers = re.findall(r"[-+]?\d+(?:\.\d+)?", cleaned)
    if len(numbers) != 1:
        return None
    value = float(numbers[0])
    return int(value) if value.is_integer() else None


def reward(completion_ids, gold, stop_ids):
    """1.0 when the reply's final answer equals the gold integer (the stop token spellings are
    stripped from the end first, as parseAssistant does)."""
    text = decode(completion_ids)
    stops = [TEMPLATE_SPECIALS[i] for i in stop_ids if i in TEMPLATE_SPECIALS]
    stripped = True
    while stripped:
        stripped = False
        for s in stops:
            if text.endswith(s):
                text, stripped = text[:-len(s)], True
    answer = extract_answer(text.strip())
    return float(answer is not None and parse_integer(answer) == int(gold))


def check_rollouts(paths, stop_ids):
    """Our reward against rlx's on its own rollouts; the gold is the task id's sum."""
    n = agree = 0
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            completion = [t for t, m in zip(r["token_ids"], r["loss_mask"]) if m]
            gold = sum(int(x) for x in r["task_id"].split(" + "))
            n += 1
            agree += reward(completion, gold, stop_ids) == r["reward"]
    print(f"reward check: {agree}/{n} rlx rollouts agree")
    assert agree == n, "the Python reward disagrees with rlx's on some rollouts"


# --- sampling ----------------------------------------------------------------------------------

@torch.inference_mode()
def generate(cfg, p, prompts, max_new, temperature, stop_ids, gen):
    """prompts: equal-length id lists. Returns completions (lists of ids, the stop token included)."""
    B, P = len(prompts), len(prompts[0])
    assert all(len(x) == P for x in prompts), "prompts of the math env with 2-digit operands all have one length"
    kvh, hd = cfg["num_key_value_heads"], cfg["head_dim"]
    caches = [(torch.zeros(B, kvh, P + max_new, hd), torch.zeros(B, kvh, P + max_new, hd)) for _ in p["layers"]]
    stop = torch.tensor(stop_ids)
    done = torch.zeros(B, dtype=torch.bool)
    out = []
    ids, start = torch.tensor(prompts), 0
    for _ in range(max_new):
        logits = F.linear(decode_step(cfg, p, ids, start, caches), p["lm_head"]).float()
        if temperature > 0:
            token = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen)[:, 0]
        else:
            token = logits.argmax(-1)
        out.append(torch.where(done, torch.full_like(token, -1), token))
        done |= torch.isin(token, stop)
        start += ids.shape[1]
        ids = token[:, None]
        if bool(done.all()):
            break
    rows = torch.stack(out, 1).tolist()
    return [[t for t in row if t >= 0] for row in rows]


def evaluate(cfg, p, tasks, stop_ids, max_new):
    completions = generate(cfg, p, [t["prompt_ids"] for t in tasks], max_new, 0.0, stop_ids, None)
    return sum(reward(c, t["answer"], stop_ids) for c, t in zip(completions, tasks)) / len(tasks)


# --- one GRPO step -----------------------------------------------------------------------------

def policy_loss(cfg, p, prompts, completions, advantages, total_tokens):
    """-sum(A * logp) over the completion tokens of the samples with A != 0, / total_tokens."""
    keep = [i for i, a in enumerate(advantages) if a != 0]
    if not keep:
        return None
    seqs = [prompts[i] + completions[i] for i in keep]
    lengths = [len(s) for s in seqs]
    ids = torch.tensor([t for s in seqs for t in s])
    pos = torch.cat([torch.arange(n) for n in lengths])
    hidden = forward(cfg, p, ids, pos, lengths)
    # The token at position j is predicted by the hidden state at j - 1 of the same sample.
    pred_rows, targets, adv = [], [], []
    offset = 0
    for i, n in zip(keep, lengths):
        P, C = len(prompts[i]), len(completions[i])
        pred_rows.extend(range(offset + P - 1, offset + P + C - 1))
        targets.extend(completions[i])
        adv.extend([advantages[i]] * C)
        offset += n
    logits = F.linear(hidden[torch.tensor(pred_rows)], p["lm_head"]).float()
    logp = torch.log_softmax(logits, -1).gather(1, torch.tensor(targets)[:, None])[:, 0]
    return -(torch.tensor(adv) * logp).sum() / total_tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tasks", required=True, help="experiments/scripts/dump_add_tasks.ts output")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--eval-n", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-rollouts", nargs="*", default=[])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = json.load(open(args.tasks))
    stop_ids = data["stop_ids"]
    if args.check_rollouts:
        check_rollouts(args.check_rollouts, stop_ids)
    cfg, p = load_student(args.model)
    params = leaves(p)
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    evals, evals_all, steps = {}, {}, []
    t_start = time.perf_counter()

    def run_evals(step):
        t0 = time.perf_counter()
        evals[step] = evaluate(cfg, p, data["eval"][:args.eval_n], stop_ids, args.max_new)
        line = f"eval step {step}: greedy pass@1 {evals[step]:.3f} on {args.eval_n}"
        if step in (0, args.steps):
            evals_all[step] = evaluate(cfg, p, data["eval"], stop_ids, args.max_new)
            line += f", {evals_all[step]:.3f} on {len(data['eval'])}"
        print(f"{line} ({time.perf_counter() - t0:.1f} s)", flush=True)

    run_evals(0)
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        tasks = data["train"][(step - 1) * args.prompts:step * args.prompts]
        assert len(tasks) == args.prompts, "dump more train draws (--train in dump_add_tasks.ts)"
        prompts = [t["prompt_ids"] for t in tasks for _ in range(args.group)]
        completions = generate(cfg, p, prompts, args.max_new, 1.0, stop_ids, gen)
        rewards = [reward(c, t["answer"], stop_ids) for c, t in zip(completions, [t for t in tasks for _ in range(args.group)])]
        advantages = []
        for g in range(args.prompts):
            group = rewards[g * args.group:(g + 1) * args.group]
            mean = sum(group) / len(group)
            advantages.extend(r - mean for r in group)
        t_gen = time.perf_counter() - t0
        total_tokens = sum(len(c) for c in completions)
        opt.zero_grad(set_to_none=True)
        loss = policy_loss(cfg, p, prompts, completions, advantages, total_tokens)
        grad_norm = 0.0
        if loss is not None:
            loss.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, 1.0))
            opt.step()
        seconds = time.perf_counter() - t0
        row = {"step": step, "reward": sum(rewards) / len(rewards), "seconds": seconds, "gen_s": t_gen,
               "completion_tokens": total_tokens, "trained_samples": sum(a != 0 for a in advantages),
               "loss": float(loss) if loss is not None else 0.0, "grad_norm": grad_norm}
        steps.append(row)
        print(f"step {step:3d}  reward {row['reward']:.3f}  trained {row['trained_samples']:3d}/{len(rewards)}  "
              f"tokens {total_tokens}  grad_norm {grad_norm:.4f}  {seconds:.1f} s (gen {t_gen:.1f})", flush=True)
        if step % args.eval_every == 0:
            run_evals(step)
    wall = time.perf_counter() - t_start
    print("\n| step | " + " | ".join(str(s) for s in evals) + " |")
    print("| greedy pass@1 (eval-100) | " + " | ".join(f"{v:.2f}" for v in evals.values()) + " |")
    print(f"eval-200 greedy: {evals_all}; wall {wall / 60:.1f} min")
    json.dump({"args": vars(args), "torch": torch.__version__, "threads": torch.get_num_threads(), "wall_s": wall,
               "eval_greedy": evals, f"eval_greedy_all_{len(data['eval'])}": evals_all, "steps": steps},
              open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
