"""Logprobs of token sequences under a LoRA adapter directory in PEFT's layout, computed without
peft (not installed on these machines) the way its LoRA Linear layer defines the adapted model:
each target weight becomes W + (lora_alpha / r) B A, merged here by hand in float64, then the
reference forward of hf_logprobs.py runs in float64 on the merged weights.

Used by test/native/lora_torch.test.ts to check rlx's unmerged adapter (native/src/lora.cpp) against
an independent reading of the files it writes: tensor names, A/B shapes, the scaling. Usage:
  /usr/bin/python3 lora_logprobs.py ADAPTER_DIR '[[1, 2, 3], [4, 5]]'
The base model is adapter_config.json's base_model_name_or_path.
"""
import json
import os
import sys

import torch

from hf_logprobs import logprobs, read_dir, read_safetensors

PREFIX = "base_model.model."


def main():
    adapter_dir, sequences = sys.argv[1], json.loads(sys.argv[2])
    config = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
    base_dir = config["base_model_name_or_path"]
    hf = json.load(open(os.path.join(base_dir, "config.json")))
    weights = {name: t.double() for name, t in read_dir(base_dir).items()}
    adapter = read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"))
    scale = config["lora_alpha"] / config["r"]
    merged = 0
    for name, a in adapter.items():
        if not name.endswith(".lora_A.weight"):
            continue
        module = name[len(PREFIX):-len(".lora_A.weight")]
        b = adapter[PREFIX + module + ".lora_B.weight"]
        weights[module + ".weight"] = weights[module + ".weight"] + scale * (b.double() @ a.double())
        merged += 1
    if merged * 2 != len(adapter):
        sys.exit(f"{len(adapter)} adapter tensors but {merged} lora_A/lora_B pairs")
    print(json.dumps(logprobs(hf, weights, sequences)))


if __name__ == "__main__":
    main()
