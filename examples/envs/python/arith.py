"""Addition with a calculator tool: the tasks, the tool and the exact reward that both reference
servers share (arith_step.py serves them step-driven, arith_agent.py env-driven)."""

import random
import re

from envserver import EnvError

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluates an expression of integers with + - * and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 123 + 456"}},
            "required": ["expression"],
        },
    },
}

SYSTEM = (
    "You can call the calculator tool. When you know the sum, answer with the number alone."
)

ARGS = {"digits": 2, "tasks": 200}


def check_args(args):
    """The args table with defaults filled in; an unknown key or a bad value is an EnvError."""
    unknown = sorted(set(args) - set(ARGS))
    if unknown:
        raise EnvError(f"unknown arg {unknown[0]!r}; the args are {', '.join(ARGS)}")
    out = {**ARGS, **args}
    for key in ARGS:
        if not isinstance(out[key], int) or out[key] < 1:
            raise EnvError(f"arg {key!r} must be a positive integer, got {out[key]!r}")
    return out


def in_eval(a, b):
    """Train and eval never share a task: a pair is held out by its own numbers."""
    return (a * 31 + b * 17) % 5 == 0


def tasks(split, seed, args):
    args = check_args(args)
    if split not in ("train", "eval"):
        raise EnvError(f"split must be train or eval, got {split!r}")
    low, high = 10 ** (args["digits"] - 1), 10 ** args["digits"] - 1
    rng = random.Random(f"{seed}:{args['digits']}")
    seen, out = set(), []
    for _ in range(args["tasks"] * 20):
        if len(out) == args["tasks"]:
            break
        a, b = rng.randint(low, high), rng.randint(low, high)
        if (a, b) in seen or in_eval(a, b) != (split == "eval"):
            continue
        seen.add((a, b))
        out.append(task_of(f"{a}+{b}"))
    return out


def task_of(task_id):
    """The task an id names (ids are a+b): the same whatever seed listed it."""
    a, b = answer_parts(task_id)
    return {
        "id": task_id,
        "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {a} + {b}?"}],
        "answer": str(a + b),
    }


def answer_parts(task_id):
    try:
        a, b = task_id.split("+")
        return int(a), int(b)
    except ValueError:
        raise EnvError(f"no task {task_id!r}: task ids are a+b")


def answer_of(task_id):
    return sum(answer_parts(task_id))


def calculate(arguments):
    """The calculator: (output, is_error)."""
    expression = str((arguments or {}).get("expression", ""))
    if not re.fullmatch(r"[\d\s+\-*()]+", expression):
        return "error: only integers, + - * and parentheses", True
    try:
        return str(eval(expression, {"__builtins__": {}})), False  # digits and operators only
    except Exception as err:
        return f"error: {err}", True


RETRY = "That is not the sum. Try again; you may use the calculator."


def score(task_id, reply):
    """1 when the reply's last number is the sum."""
    numbers = re.findall(r"-?\d+", reply or "")
    return 1.0 if numbers and int(numbers[-1]) == answer_of(task_id) else 0.0
