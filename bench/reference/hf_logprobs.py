"""Logprobs of token sequences under a Hugging Face model directory, computed by this folder's
PyTorch reference model (train_step.py's forward, which follows transformers' Llama/Qwen2/Qwen3
math) from weights read with a minimal safetensors reader written here (json + struct +
torch.frombuffer; the `safetensors` package is not installed on these machines).

Used by test/native/io_torch.test.ts to check that a directory rlx writes means the same model to
an independent implementation: HF names, shapes, q/k norm, biases, tied heads. Usage:
  /usr/bin/python3 hf_logprobs.py MODEL_DIR '[[1, 2, 3], [4, 5]]'
prints a JSON list of per-token logprob lists (element 0 of each is 0: it has no prediction).

RoPE scaling ("llama3", "yarn") is computed here from config.json's rope_scaling block the way
transformers' modeling_rope_utils computes it (_compute_llama3_parameters, _compute_yarn_parameters).
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

from train_step import forward

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "F64": torch.float64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"]).float()
    return out


def read_dir(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(model_dir, "model.safetensors"))
    tensors = {}
    for shard in sorted(set(json.load(open(index))["weight_map"].values())):
        tensors.update(read_safetensors(os.path.join(model_dir, shard)))
    return tensors


def scaled_rope(hf, head_dim):
    """(inv_freq, attention_scaling) for the config's rope_scaling block, or (None, 1.0) for plain RoPE."""
    rs = hf.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    base = hf.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if kind == "default":
        return None, 1.0
    if kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        llama = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = ~(wavelen < old / high) * ~(wavelen > old / low)
        return torch.where(medium, smoothed, llama), 1.0
    assert kind == "yarn", kind
    factor, orig = rs["factor"], rs["original_max_position_embeddings"]
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return (head_dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    lo, hi = correction_dim(beta_fast), correction_dim(beta_slow)
    if rs.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, head_dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = torch.clamp((torch.arange(head_dim // 2, dtype=torch.float32) - lo) / (hi - lo), 0, 1)
    extrapolation_factor = 1 - ramp
    pos_freqs = base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation_factor) + (1.0 / pos_freqs) * extrapolation_factor
    attention = rs.get("attention_factor") or 0.1 * math.log(factor) + 1.0
    return inv, attention


def main():
    model_dir, sequences = sys.argv[1], json.loads(sys.argv[2])
    hf = json.load(open(os.path.join(model_dir, "config.json")))
    print(json.dumps(logprobs(hf, read_dir(model_dir), sequences)))


def logprobs(hf, w, sequences):
    """Per-token logprob lists of the sequences under config.json `hf` and weights `w` (name -> tensor);
    float64 weights compute in float64 from the projections on (lora_logprobs.py)."""
    cfg = dict(hf)
    cfg["head_dim"] = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
    cfg["num_key_value_heads"] = hf.get("num_key_value_heads") or hf["num_attention_heads"]
    cfg["qk_norm"] = hf["model_type"] == "qwen3"
    cfg["inv_freq"], cfg["attention_scaling"] = scaled_rope(hf, cfg["head_dim"])
    layers = []
    for i in range(hf["num_hidden_layers"]):
        p = f"model.layers.{i}."
        names = {"in_norm": "input_layernorm.weight", "post_norm": "post_attention_layernorm.weight",
                 "q": "self_attn.q_proj.weight", "k": "self_attn.k_proj.weight", "v": "self_attn.v_proj.weight",
                 "o": "self_attn.o_proj.weight", "q_bias": "self_attn.q_proj.bias", "k_bias": "self_attn.k_proj.bias",
                 "v_bias": "self_attn.v_proj.bias", "q_norm": "self_attn.q_norm.weight", "k_norm": "self_attn.k_norm.weight",
                 "gate": "mlp.gate_proj.weight", "up": "mlp.up_proj.weight", "down": "mlp.down_proj.weight"}
        layers.append({key: w[p + name] for key, name in names.items() if p + name in w})
    params = {"embed": w["model.embed_tokens.weight"], "norm": w["model.norm.weight"], "layers": layers}
    params["lm_head"] = w["model.embed_tokens.weight"] if hf.get("tie_word_embeddings") else w["lm_head.weight"]
    out = []
    with torch.no_grad():
        for seq in sequences:
            ids = torch.tensor(seq)
            hidden = forward(cfg, params, ids, torch.arange(len(seq)), [len(seq)])
            logits = F.linear(hidden, params["lm_head"])
            logp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            lp = logp[:-1].gather(1, ids[1:, None]).squeeze(1)
            out.append([0.0] + lp.tolist())
    return out


if __name__ == "__main__":
    main()
