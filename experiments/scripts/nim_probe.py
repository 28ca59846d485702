"""The per-pile probe of docs/results.md §13: a Nim policy's three most likely moves at every pile
of 1-15 stones, from the top logprobs of one sampled token (`/v1/completions` with `logprobs: 5`),
beside the winning move (pile mod 4; none at a multiple of 4). Serve the model first:

  RLX_THREADS=1 dist/rlx serve --model DIR --served-model-name m --port 8450 &
  python3 experiments/scripts/nim_probe.py 8450 [bare|chat]

Standard library only; the prompts are the nim env's (src/envs/nim/index.ts, max_take 3)."""
import json
import math
import sys
import urllib.request

port = sys.argv[1]
fmt = sys.argv[2] if len(sys.argv) > 2 else "bare"


def prompt(pile: int) -> str:
    take = min(3, pile)
    if fmt == "bare":
        return f"Take 1 to {take} stones from {pile}:"
    stones = "is 1 stone" if pile == 1 else f"are {pile} stones"
    return (f"Nim: there {stones} left. Take 1 to {take} stones; whoever takes the last stone wins. "
            "Reply with the number you take.")


for pile in range(1, 16):
    body = {"model": "m", "prompt": prompt(pile), "max_tokens": 1, "logprobs": 5, "temperature": 1.0}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
    top = json.load(urllib.request.urlopen(request))["choices"][0]["logprobs"]["top_logprobs"][0]
    best = sorted(top.items(), key=lambda kv: -kv[1])[:3]
    winning = f"win: {pile % 4}" if pile % 4 else "lose"
    print(pile, winning, "  ".join(f"{token!r} {math.exp(lp):.2f}" for token, lp in best))
