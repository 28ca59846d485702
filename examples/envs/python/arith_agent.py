"""An env-driven env server for rlx (docs/environments.md, "Python environments"), standard library
only: the same addition task as arith_step.py, but this server runs the episode itself, as a
verifiers environment does. rlx sends /run the task and a policy endpoint (an OpenAI-compatible
base URL with a key of the episode's own); the server calls /chat/completions through urllib,
runs the calculator calls it gets back, asks again after a wrong answer (as arith_step.py does), and
returns the conversation and its reward. It never
returns tokens: rlx kept the ones it served.

    python3 examples/envs/python/arith_agent.py --port 8766
"""

import json
import urllib.error
import urllib.request

import arith
from envserver import EnvError, serve


def chat(policy, messages):
    """One completion from the policy endpoint rlx gave this episode."""
    body = json.dumps({"model": policy["model"], "messages": messages, "tools": [arith.CALCULATOR]}).encode()
    request = urllib.request.Request(
        policy["base_url"] + "/chat/completions",
        data=body,
        headers={"content-type": "application/json", "authorization": f"Bearer {policy['api_key']}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.load(response)["choices"][0]["message"]
    except urllib.error.HTTPError as err:
        raise EnvError(f"the policy endpoint answered {err.code}: {err.read().decode()[:300]}")


class ArithAgent:
    id = "arith_agent"
    description = "addition with a calculator tool, the episode run by the env: reward 1 for the sum"
    shape = "env"
    tools = [arith.CALCULATOR]
    max_turns = 4

    def tasks(self, split, seed, args):
        return arith.tasks(split, seed, args)

    def run(self, task_id, args, policy):
        arith.check_args(args)
        messages = list(arith.task_of(task_id)["prompt"])
        calls, correct = 0, 0.0
        for turn in range(self.max_turns):
            reply = chat(policy, messages)
            messages.append(reply)
            if turn + 1 == self.max_turns:
                correct = 0.0 if reply.get("tool_calls") else arith.score(task_id, reply.get("content"))
                break
            if reply.get("tool_calls"):
                for call in reply["tool_calls"]:
                    output, _ = arith.calculate(json.loads(call["function"]["arguments"] or "{}"))
                    messages.append({"role": "tool", "tool_call_id": call["id"], "name": "calculator", "content": output})
                    calls += 1
                continue
            correct = arith.score(task_id, reply.get("content"))
            if correct:
                break
            messages.append({"role": "user", "content": arith.RETRY})
        return {"messages": messages, "reward": correct, "metrics": {"correct": correct, "tool_calls": calls}}


if __name__ == "__main__":
    serve(ArithAgent())
