"""PyTorch-eager reference for bench/generate.ts: batched decoding with a preallocated KV cache.

Run by the harness with Debian's python (/usr/bin/python3, torch 1.13, the same libtorch and BLAS
as the shim); prints one JSON line. The model is bench/reference/train_step.py's (same forward
math); generation is the usual eager loop under torch.inference_mode(): one prefill of the
prompts (causal, writing K/V into caches of shape [B, kv_heads, prompt + new, head_dim] per layer),
then one decode step per new token that writes its K/V at its position and attends over the cache
prefix, with GQA as a view (no K/V copies), temperature 1 sampling through torch.multinomial from a
seeded generator. All prompts have the same length, so every row decodes at the same position.

Prefill (the prompt forward and the first token) is timed apart from decode; decode throughput is
B * (new - 1) / decode seconds: the new - 1 steps that each run one forward and sample one token.
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

from train_step import build_params, rms_norm, rotate_half


def rope(cfg, positions):
    hd = cfg["head_dim"]
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def step(cfg, p, ids, start, caches):
    """ids [B, n] at positions start..start+n-1 (the same for every row); returns last hidden [B, d]."""
    B, n = ids.shape
    hd, h, kvh, eps = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    rep = h // kvh
    cos, sin = rope(cfg, torch.arange(start, start + n))
    cos, sin = cos[None, :, None], sin[None, :, None]  # [1, n, 1, hd]
    span = start + n
    mask = None
    if n > 1:
        mask = torch.ones(n, span, dtype=torch.bool).triu(start + 1)
    x = F.embedding(ids, p["embed"])
    for L, (kc, vc) in zip(p["layers"], caches):
        y = rms_norm(x, L["in_norm"], eps)
        q = F.linear(y, L["q"]).view(B, n, h, hd)
        k = F.linear(y, L["k"]).view(B, n, kvh, hd)
        v = F.linear(y, L["v"]).view(B, n, kvh, hd)
        if cfg["qk_norm"]:
            q, k = rms_norm(q, L["q_norm"], eps), rms_norm(k, L["k_norm"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        kc[:, :, start:span] = k.transpose(1, 2)
        vc[:, :, start:span] = v.transpose(1, 2)
        q = q.view(B, n, kvh, rep, hd).permute(0, 2, 3, 1, 4).reshape(B, kvh, rep * n, hd)
        scores = torch.matmul(q, kc[:, :, :span].transpose(2, 3)).view(B, kvh, rep, n, span) / math.sqrt(hd)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype).view(B, kvh, rep * n, span)
        out = torch.matmul(probs, vc[:, :, :span]).view(B, kvh, rep, n, hd).permute(0, 3, 1, 2, 4).reshape(B, n, h * hd)
        x = x + F.linear(out, L["o"])
        y = rms_norm(x, L["post_norm"], eps)
        x = x + F.linear(F.silu(F.linear(y, L["gate"])) * F.linear(y, L["up"]), L["down"])
    return rms_norm(x[:, -1], p["norm"], eps)


def sample(p, hidden, gen):
    probs = torch.softmax(F.linear(hidden, p["lm_head"]).float(), dim=-1)
    return torch.multinomial(probs, 1, generator=gen)  # [B, 1]


def generate(cfg, p, prompts, new_tokens, gen):
    """Prefill (forward + first token) and decode (new_tokens - 1 steps of forward + sample), timed apart."""
    B, P = prompts.shape
    caches = [(torch.zeros(B, cfg["num_key_value_heads"], P + new_tokens, cfg["head_dim"]),
               torch.zeros(B, cfg["num_key_value_heads"], P + new_tokens, cfg["head_dim"])) for _ in p["layers"]]
    t0 = time.perf_counter()
    token = sample(p, step(cfg, p, prompts, 0, caches), gen)
    t1 = time.perf_counter()
    out = [token]
    for i in range(new_tokens - 1):
        token = sample(p, step(cfg, p, token, P + i, caches), gen)
        out.append(token)
    t2 = time.perf_counter()
    return torch.cat(out, 1), t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="the shim's flat config JSON")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cfg = json.loads(args.config)
    with torch.inference_mode():
        params = build_params(cfg, args.seed, "cpu")
        gen = torch.Generator().manual_seed(args.seed + 1)
        prompts = torch.randint(0, 259, (args.batch, args.prompt), generator=gen)
        generate(cfg, params, prompts, 4, gen)  # warm-up
        runs = [generate(cfg, params, prompts, args.new, gen)[1:] for _ in range(args.repeats)]
    decode_s = sorted(r[1] for r in runs)[len(runs) // 2]
    prefill_s = sorted(r[0] for r in runs)[len(runs) // 2]
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "batch": args.batch,
                      "prompt": args.prompt, "new": args.new, "prefill_s": prefill_s, "decode_s": decode_s,
                      "decode_tok_s": args.batch * (args.new - 1) / decode_s}))


if __name__ == "__main__":
    main()
