"""PyTorch-eager reference for bench/train_step.ts: one full rlx training step, written the way a
PyTorch user would write it, on the same libtorch and BLAS the shim links.

Run by the harness with Debian's python (/usr/bin/python3, torch 1.13); it prints one JSON line.
The model and loss are the ones rlx trains (docs/architecture.md §6): a Qwen3-style decoder (RMSNorm,
RoPE, GQA, q/k norm, SwiGLU) over ONE packed row of several samples with block-diagonal causal
attention and positions restarting per sample, the three loss components (DPPO+KL "rl", "ce",
"ref_kl") each normalized by its own token count, backward, global grad-norm clipping at 1.0 and
torch.optim.AdamW. Attention runs per sample (causal within it, which is what block-diagonal means)
with GQA done by viewing q as [kv_heads, rep*n, head_dim] instead of copying K/V: the same algorithm
the shim uses, so the ratio measures implementation overhead, not an algorithmic shortcut. (Full
[T, T] masked attention over a 4096-token row is ~5x slower here: 4.8 s/step on `tiny`.)

The batch is synthetic but has the structure of a real step: the harness passes the sample lengths,
and both sides mark actions, loss weights and advantages by the same rules (make_batch).
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F


def build_params(cfg, seed, device):
    gen = torch.Generator().manual_seed(seed)
    d, hd, h, kvh, f, v = (cfg[k] for k in ("hidden_size", "head_dim", "num_attention_heads",
                                            "num_key_value_heads", "intermediate_size", "vocab_size"))
    normal = lambda *shape: (torch.randn(*shape, generator=gen) * 0.02).to(device).requires_grad_()
    ones = lambda n: torch.ones(n, device=device).requires_grad_()
    p = {"embed": normal(v, d), "norm": ones(d), "layers": []}
    for _ in range(cfg["num_hidden_layers"]):
        layer = {"in_norm": ones(d), "q": normal(h * hd, d), "k": normal(kvh * hd, d), "v": normal(kvh * hd, d),
                 "o": normal(d, h * hd), "post_norm": ones(d), "gate": normal(f, d), "up": normal(f, d), "down": normal(d, f)}
        if cfg["qk_norm"]:
            layer["q_norm"], layer["k_norm"] = ones(hd), ones(hd)
        p["layers"].append(layer)
    p["lm_head"] = p["embed"] if cfg["tie_word_embeddings"] else normal(v, d)
    return p


def leaves(p):
    out = [p["embed"], p["norm"]] + [t for layer in p["layers"] for t in layer.values()]
    if p["lm_head"] is not p["embed"]:
        out.append(p["lm_head"])
    return out


def rms_norm(x, w, eps):
    x32 = x.float()
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def attend_causal(q, k, v):
    """q [n, h, hd], k/v [n, kvh, hd] -> [n, h*hd]; causal within one sample."""
    n, h, hd = q.shape
    kvh = k.shape[1]
    if q.is_cuda:  # what a PyTorch user writes on a GPU: the fused kernel, GQA without copies
        qh, kh, vh = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=True)
        return out.transpose(0, 1).reshape(n, h * hd)
    rep = h // kvh
    q = q.view(n, kvh, rep, hd).permute(1, 2, 0, 3).reshape(kvh, rep * n, hd)
    scores = torch.matmul(q, k.permute(1, 2, 0)).view(kvh, rep, n, n) / math.sqrt(hd)
    future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    probs = F.softmax(scores.masked_fill(future, float("-inf")), dim=-1, dtype=torch.float32).to(v.dtype)
    out = torch.matmul(probs.view(kvh, rep * n, n), v.permute(1, 0, 2))  # [kvh, rep*n, hd]
    return out.view(kvh, rep, n, hd).permute(2, 0, 1, 3).reshape(n, h * hd)


def forward(cfg, p, ids, pos, lengths):
    """Hidden states after the final norm, [T, d], for one packed row of samples of these lengths."""
    T = ids.shape[0]
    hd, h, kvh, eps = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    inv_freq = cfg.get("inv_freq")  # a scaled RoPE's (hf_logprobs.py), else plain RoPE
    if inv_freq is None:
        inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32, device=ids.device) / hd))
    freqs = pos.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    scale = cfg.get("attention_scaling", 1.0)
    cos, sin = emb.cos()[:, None] * scale, emb.sin()[:, None] * scale
    x = F.embedding(ids, p["embed"])
    for L in p["layers"]:
        y = rms_norm(x, L["in_norm"], eps)
        q = F.linear(y, L["q"], L.get("q_bias")).view(T, h, hd)
        k = F.linear(y, L["k"], L.get("k_bias")).view(T, kvh, hd)
        v = F.linear(y, L["v"], L.get("v_bias")).view(T, kvh, hd)
        if cfg["qk_norm"]:
            q, k = rms_norm(q, L["q_norm"], eps), rms_norm(k, L["k_norm"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        outs, start = [], 0
        for n in lengths:
            outs.append(attend_causal(q[start:start + n], k[start:start + n], v[start:start + n]))
            start += n
        x = x + F.linear(torch.cat(outs, 0), L["o"])
        y = rms_norm(x, L["post_norm"], eps)
        x = x + F.linear(F.silu(F.linear(y, L["gate"])) * F.linear(y, L["up"]), L["down"])
    return rms_norm(x, p["norm"], eps)


def make_batch(cfg, lengths, seed):
    """Token ids, positions, labels and the loss streams of one packed row."""
    gen = torch.Generator().manual_seed(seed)
    T = sum(lengths)
    ids = torch.randint(0, 259, (T,), generator=gen)
    pos = torch.cat([torch.arange(n) for n in lengths])
    seg = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    labels = torch.roll(ids, -1)
    has_label = torch.ones(T, dtype=torch.bool)
    ends = torch.cumsum(torch.tensor(lengths), 0) - 1
    has_label[ends] = False
    # Sample i: the second half of its tokens are actions; samples cycle rl, rl+ce, ref_kl.
    action = (pos >= torch.tensor(lengths)[seg] // 2) & has_label
    kind = seg % 3
    rl_w = (action & (kind != 2)).float()
    ce_w = (action & (kind == 1)).float() * 0.1
    ref_w = (action & (kind == 2)).float()
    adv = (torch.rand(len(lengths), generator=gen) - 0.5)[seg] * action
    ilp = -torch.rand(T, generator=gen) * 3 - 2
    ref_lp = -torch.rand(T, generator=gen) * 3 - 2
    temps = torch.ones(T)
    return ids, pos, labels, action, rl_w, ce_w, ref_w, adv, ilp, ref_lp, temps


def loss_fn(lp, action, rl_w, ce_w, ref_w, adv, ilp, ref_lp):
    log_ratio = lp - ilp
    ratio = torch.exp(log_ratio)
    dp = (torch.exp(lp) - torch.exp(ilp)).detach()
    masked = torch.where(adv > 0, dp > 0.2, dp < -0.2).float()
    l_rl = (-(1 - masked) * adv * ratio + 1e-3 * log_ratio.pow(2)) * rl_w
    l_ce = -lp * ce_w
    ref_adv = (ref_lp - lp).detach()
    ref_masked = (dp < -0.2).float()
    l_ref = (-(1 - ref_masked) * ref_adv * ratio + 1e-3 * log_ratio.pow(2)) * ref_w
    n_rl = max(1, int(((rl_w != 0) & action).sum()))
    n_ce, n_ref = max(1, int((ce_w != 0).sum())), max(1, int((ref_w != 0).sum()))
    return l_rl.sum() / n_rl + l_ce.sum() / n_ce + l_ref.sum() / n_ref


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="the shim's flat config JSON")
    ap.add_argument("--lengths", required=True, help="comma-separated sample lengths of one packed row")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--autocast", action="store_true", help="bf16 autocast for the forward (the LM head stays f32)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    args = ap.parse_args()
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cfg = json.loads(args.config)
    lengths = [int(n) for n in args.lengths.split(",")]
    params = build_params(cfg, args.seed, device)
    opt = torch.optim.AdamW(leaves(params), lr=1e-5, betas=(0.9, 0.999), weight_decay=0.01)
    batch = [t.to(device) for t in make_batch(cfg, lengths, args.seed + 1)]
    ids, pos, labels, action, rl_w, ce_w, ref_w, adv, ilp, ref_lp, temps = batch
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.autocast):
            hidden = forward(cfg, params, ids, pos, lengths)
        # the LM head and logprobs in float32, as rlx computes them
        logits = F.linear(hidden.float(), params["lm_head"]) / temps[:, None]
        lp = torch.log_softmax(logits, dim=-1).gather(1, labels[:, None]).squeeze(1)
        loss = loss_fn(lp, action, rl_w, ce_w, ref_w, adv, ilp, ref_lp)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(leaves(params), 1.0)
        opt.step()
        sync()
        elapsed = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(elapsed)
            losses.append(loss.item())
    T = sum(lengths)
    median = statistics.median(times)
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "tokens": T,
                      "step_s": times, "median_s": median, "tok_s": T / median, "losses": losses}))


if __name__ == "__main__":
    main()
