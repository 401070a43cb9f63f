"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests: scripted faults per model."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAI:
    """``script[model]`` is a list of behaviours consumed one per request (then "ok"):
    ``ok``, ``429`` (Retry-After: 0), ``500``, ``hang`` (sleeps ``hang_s``), ``malformed``,
    ``noverdict``, and the echoes of a gateway that repeats the request's Authorization header
    back: ``echo401`` (in a 401 error body), ``echo500`` (in a 500 error body), ``echo200``
    (in a 200 body that is not a chat completion). ``content(body)`` makes the text of an
    ``ok`` reply; ``message(body)``, when set, makes the whole assistant message of an ``ok``
    reply (e.g. with ``tool_calls``). Each recorded request keeps its arrival time (``at``,
    ``time.time()``)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: dict[str, list[str]] = {}
        self.content: Callable[[dict[str, Any]], str] = lambda body: "ok"
        self.message: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self.hang_s = 3.0
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _next(self, model: str) -> str:
        with self.lock:
            queue = self.script.get(model, [])
            return queue.pop(0) if queue else "ok"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None):
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                arrived = time.time()  # wall clock: comparable across test processes
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                body = json.loads(raw)
                with fake.lock:
                    fake.requests.append(
                        {
                            "path": self.path,
                            "body": body,
                            "authorization": self.headers.get("authorization"),
                            "at": arrived,
                        }
                    )
                if self.path != "/v1/chat/completions":
                    self._send(404, b"{}")
                    return
                behaviour = fake._next(body.get("model", ""))
                echoed = json.dumps(
                    {"error": "invalid request", "authorization": self.headers.get("authorization")}
                ).encode()
                if behaviour.startswith("echo"):
                    self._send(int(behaviour[4:]), echoed, {"content-type": "application/json"})
                elif behaviour == "429":
                    self._send(429, b'{"error": "slow down"}', {"retry-after": "0"})
                elif behaviour == "500":
                    self._send(500, b'{"error": "boom"}')
                elif behaviour == "hang":
                    time.sleep(fake.hang_s)
                    self._send(500, b"{}")
                elif behaviour == "malformed":
                    self._send(200, b"this is not json", {"content-type": "application/json"})
                else:
                    if behaviour == "noverdict":
                        message = {"role": "assistant", "content": "I liked it, 8/10."}
                    elif fake.message is not None:
                        message = {"role": "assistant", **fake.message(body)}
                    else:
                        message = {"role": "assistant", "content": fake.content(body)}
                    reply = {
                        "id": "x",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls"
                                if message.get("tool_calls")
                                else "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }
                    self._send(
                        200, json.dumps(reply).encode(), {"content-type": "application/json"}
                    )

        return Handler


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    """An assistant message asking for one tool call, as OpenAI's API sends it."""
    return {
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


@contextmanager
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    fake.server = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    fake.server.daemon_threads = True
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def most_in_a_window(times: list[float], window_s: float) -> int:
    """The most requests that arrived within any ``window_s`` seconds (a window starting at
    each arrival: where the most-crowded window can start).

    >>> most_in_a_window([0.0, 0.1, 0.2, 1.0, 1.05], 0.5)
    3
    """
    ordered = sorted(times)
    return max(
        (sum(1 for t in ordered[i:] if t - start <= window_s) for i, start in enumerate(ordered)),
        default=0,
    )
