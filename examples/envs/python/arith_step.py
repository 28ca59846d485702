"""A step-driven env server for rlx (docs/environments.md, "Python environments"), standard library
only: addition with a calculator tool and an exact reward. rlx drives: it resets a session per
rollout and sends each model turn to /step; a turn that calls the calculator gets the tool's result
back (reward 0, not done); a turn without a call is an answer: reward 1 and done when it is the sum,
else a user turn asking again (reward 0), until the last of max_turns turns.

    python3 examples/envs/python/arith_step.py --port 8765

then, in a run config:  [[orchestrator.train.env]]  id = "http://127.0.0.1:8765"  args = { digits = 2 }
"""

import itertools
import json
import threading

import arith
from envserver import EnvError, serve


class ArithStep:
    id = "arith"
    description = "addition with a calculator tool: reward 1 for the sum"
    shape = "step"
    tools = [arith.CALCULATOR]
    max_turns = 4

    def __init__(self):
        self.sessions = {}
        self.lock = threading.Lock()
        self.ids = itertools.count()

    def tasks(self, split, seed, args):
        return arith.tasks(split, seed, args)

    def reset(self, task_id, args):
        arith.check_args(args)
        arith.answer_of(task_id)  # an id that names no task is an EnvError
        with self.lock:
            session_id = f"s{next(self.ids)}"
            self.sessions[session_id] = {"task": task_id, "calls": 0, "turns": 0, "wrong": 0}
        return {"session_id": session_id}

    def step(self, session_id, message):
        session = self.sessions.get(session_id)
        if session is None:
            raise EnvError(f"no session {session_id!r} (closed, or never opened)")
        calls = message.get("tool_calls") or []
        session["turns"] += 1
        last = session["turns"] >= self.max_turns
        if calls and not last:
            results = []
            for call in calls:
                fn = call.get("function", {})
                arguments = fn.get("arguments")
                if isinstance(arguments, str):  # OpenAI's wire form; rlx sends the parsed object
                    arguments = json.loads(arguments or "{}")
                if fn.get("name") == "calculator":
                    output, _ = arith.calculate(arguments)
                else:
                    output = f"error: no tool {fn.get('name')!r}; the tool is calculator"
                results.append({"role": "tool", "name": "calculator", "content": output})
            session["calls"] += len(calls)
            return {"messages": results, "reward": 0.0, "done": False, "metrics": {"tool_calls": session["calls"]}}
        correct = arith.score(session["task"], message.get("content"))
        session["wrong"] += 1 - int(correct)
        metrics = {"correct": correct, "tool_calls": session["calls"], "wrong_answers": session["wrong"]}
        if correct or last:
            return {"messages": [], "reward": correct, "done": True, "metrics": metrics}
        return {"messages": [{"role": "user", "content": arith.RETRY}], "reward": 0.0, "done": False, "metrics": metrics}

    def close(self, session_id):
        with self.lock:
            self.sessions.pop(session_id, None)


if __name__ == "__main__":
    serve(ArithStep())
