"""A local stand-in for an OpenAI-compatible server, so the example runs without a key.

    python examples/openai_judge/fake_server.py            # serves http://127.0.0.1:8000/v1

It answers POST /v1/chat/completions in two roles:

* the **model** (any request without ``tools``): solves "Compute A + B." and errs at random,
  seeded by the request's ``seed``: a "step by step" prompt errs 10% of the time and answers
  on an "ANSWER: n" line; any other prompt errs 25% of the time and sometimes adds words;
* the **judge** (a request with ``tools``): works like an agent in the workspace through tool
  calls: it lists the files, reads the candidate's prompt (``solver/prompt.md``), the model's
  output and score.yaml, then calls ``write_score``: ``exact``, minus 0.2 when the output does
  not follow the format the prompt asked for.

Standard library only; every reply reports token usage. Not a language model: it exists to
exercise honesteval's plumbing (seeds, retries, tools, budgets) end to end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_QUESTION = re.compile(r"(-?\d+)\s*\+\s*(-?\d+)")
# What the judge reads, in order; the file name is the tool result's key.
_READS = ["solver/prompt.md", "solver/output.json", "logs/evaluate/score.yaml"]


def model_reply(body: dict[str, Any]) -> dict[str, Any]:
    prompt = str(body["messages"][-1]["content"])
    match = _QUESTION.search(prompt)
    if match is None:
        return {"content": "I only add numbers."}
    a, b = int(match.group(1)), int(match.group(2))
    rng = random.Random(f"{body.get('seed')}|{a}|{b}|{prompt}")
    stepwise = "step by step" in prompt
    answer = (
        a + b + (rng.choice([-10, -1, 1, 10]) if rng.random() < (0.1 if stepwise else 0.25) else 0)
    )
    if stepwise:
        return {"content": f"{a} + {b}: add the units, then the tens.\nANSWER: {answer}"}
    return {"content": f"The sum is {answer}." if rng.random() < 0.2 else str(answer)}


def _tool_call(n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "content": None,
        "tool_calls": [{"id": f"call{n}", "type": "function", "function": call}],
    }


def judge_reply(body: dict[str, Any]) -> dict[str, Any]:
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if not results:
        return _tool_call(0, "list_files", {"path": "."})
    if len(results) <= len(_READS):
        return _tool_call(len(results), "read_file", {"path": _READS[len(results) - 1]})
    if len(results) == len(_READS) + 1:
        prompt, output_json, score_yaml = results[1:4]
        output = str(json.loads(output_json) or "")
        exact = 1.0 if "exact: 1.0" in score_yaml else 0.0
        lines = output.strip().splitlines()
        if "ANSWER:" in prompt:
            follows = bool(lines) and lines[-1].startswith("ANSWER:")
        else:
            follows = output.strip().lstrip("-").isdigit()
        score = max(0.0, exact - (0.0 if follows else 0.2))
        summary = ("right" if exact else "wrong") + (
            ", format followed" if follows else ", format not followed"
        )
        verdict = json.dumps({"score": round(score, 2), "summary": summary})
        return _tool_call(len(results), "write_score", {"verdict": verdict})
    return {"content": "Verdict written."}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": "not found"})
            return
        message = judge_reply(body) if body.get("tools") else model_reply(body)
        self._send(
            200,
            {
                "id": "fake",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", **message},
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
            },
        )

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def make_server(port: int = 8000) -> ThreadingHTTPServer:
    """The server on 127.0.0.1:``port`` (0: any free port), not yet serving."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    server = make_server(parser.parse_args().port)
    print(f"fake OpenAI-compatible server on http://127.0.0.1:{server.server_address[1]}/v1")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops it
        server.serve_forever()


if __name__ == "__main__":
    main()
