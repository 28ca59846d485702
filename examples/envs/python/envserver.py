"""The env server protocol of rlx (docs/environments.md, "Python environments") on the standard
library alone: a threaded HTTP server that routes the protocol's calls to an env object's methods,
answers errors as {"error": ...} with status 400, and prints its URL once it listens.

An env object has `id`, `description`, `shape` ("step" or "env"), `tools` (OpenAI tool specs),
`max_turns` and `tasks(split, seed, args)`; a step-driven one also `reset(task_id, args)`,
`step(session_id, message)` and `close(session_id)`; an env-driven one `run(task_id, args, policy)`.
"""

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EnvError(Exception):
    """A request the env refuses: answered with status 400 and this message."""


def serve(env, description=None):
    parser = argparse.ArgumentParser(description=description or env.description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 = any free port")
    options = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health":
                return self.answer(200, {"ok": True})
            if self.path == "/info":
                return self.answer(200, {
                    "id": env.id,
                    "description": env.description,
                    "shape": env.shape,
                    "tools": env.tools,
                    "max_turns": env.max_turns,
                })
            self.answer(404, {"error": f"GET {self.path}: not a route of this env server"})

        def do_POST(self):
            routes = {
                "/tasks": ("split",),
                "/reset": ("task_id",),
                "/step": ("session_id", "message"),
                "/close": ("session_id",),
                "/run": ("task_id", "policy"),
            }
            shapes = {"/reset": "step", "/step": "step", "/close": "step", "/run": "env"}
            if self.path not in routes or shapes.get(self.path, env.shape) != env.shape:
                return self.answer(404, {"error": f"POST {self.path}: not a route of a {env.shape}-driven env"})
            try:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError as err:
                return self.answer(400, {"error": f"the request body is not JSON: {err}"})
            missing = [key for key in routes[self.path] if key not in body]
            if missing:
                return self.answer(400, {"error": f"POST {self.path}: the request lacks {', '.join(missing)}"})
            args = body.get("args") or {}
            try:
                if self.path == "/tasks":
                    result = {"tasks": env.tasks(body["split"], body.get("seed", 0), args)}
                elif self.path == "/reset":
                    result = env.reset(body["task_id"], args)
                elif self.path == "/step":
                    result = env.step(body["session_id"], body["message"])
                elif self.path == "/close":
                    env.close(body["session_id"])
                    result = {}
                else:
                    result = env.run(body["task_id"], args, body["policy"])
            except EnvError as err:
                return self.answer(400, {"error": str(err)})
            except Exception as err:  # a bug in the env, or a call it made that failed: its reason, not a dropped connection
                return self.answer(500, {"error": f"{type(err).__name__}: {err}"})
            self.answer(200, result)

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # one line per request is too much for thousands of rollouts
            pass

    server = ThreadingHTTPServer((options.host, options.port), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"env server {env.id} ({env.shape}-driven) listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)
