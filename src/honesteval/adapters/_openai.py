"""OpenAI-compatible chat endpoints (httpx): the ``openai`` target and the judge's client.

HTTP 429 → ``RateLimited`` (honouring Retry-After), 5xx and connection errors → ``InfraError``,
a connect or read timeout → ``ServiceTimeout`` (an ``InfraError``: the network's, never the
candidate's), a body that is not a chat completion → ``InfraError``. The API
key is read from the named environment variable at call time and only ever placed in the
Authorization header: no message, record or log line here contains it.
"""

from __future__ import annotations

import json
import os
import string
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import Field

from honesteval.errors import ConfigError, InfraError, RateLimited, ServiceTimeout
from honesteval.models import Candidate, Rollout, Task
from honesteval.redaction import register_secret_env
from honesteval.retry import parse_retry_after

from ._base import AdapterParts, TargetConfig

if TYPE_CHECKING:
    from honesteval.adapters.project_view import ProjectView

_BODY_TAIL = 200


@dataclass(frozen=True)
class ChatReply:
    text: str
    tokens: int | None


class ChatClient:
    """One chat endpoint; ``complete`` makes exactly one request (callers own retries)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None,
        timeout_s: float,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        register_secret_env(api_key_env)
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.max_tokens = max_tokens

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ConfigError(f"the API key variable {self.api_key_env!r} is not set")
            headers["authorization"] = f"Bearer {key}"
        return headers

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        seed: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatReply:
        message, tokens = self.chat(
            messages, seed=seed, temperature=temperature, max_tokens=max_tokens
        )
        text = message.get("content")
        if not isinstance(text, str):
            raise InfraError(f"{self.url}: malformed chat completion: content is not a string")
        return ChatReply(text=text, tokens=tokens)

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        seed: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> tuple[dict[str, Any], int | None]:
        """One request; the assistant message (``content`` and/or ``tool_calls``) and the
        total tokens the server reported."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        temp = temperature if temperature is not None else self.temperature
        if temp is not None:
            body["temperature"] = temp
        tokens = max_tokens if max_tokens is not None else self.max_tokens
        if tokens is not None:
            body["max_tokens"] = tokens
        if seed is not None:
            body["seed"] = seed
        if tools:
            body["tools"] = tools
        import httpx  # here, not at the top: loading a project must not pay for it

        try:
            resp = httpx.post(self.url, json=body, headers=self._headers(), timeout=self.timeout_s)
        except httpx.TimeoutException:
            raise ServiceTimeout(f"{self.url}: no reply within {self.timeout_s:g} s") from None
        except httpx.TransportError as exc:
            raise InfraError(f"{self.url}: {type(exc).__name__}") from None
        if resp.status_code == 429:
            raise RateLimited(
                f"{self.url}: HTTP 429",
                retry_after=parse_retry_after(resp.headers.get("retry-after")),
            )
        if resp.status_code >= 500:
            raise InfraError(f"{self.url}: HTTP {resp.status_code}")
        if resp.status_code >= 400:
            raise InfraError(f"{self.url}: HTTP {resp.status_code}: {resp.text[:_BODY_TAIL]}")
        try:
            data = resp.json()
            message = data["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
            raise InfraError(
                f"{self.url}: malformed chat completion: {resp.text[:_BODY_TAIL]!r}"
            ) from None
        usage = data.get("usage") or {}
        total = usage.get("total_tokens")
        return message, int(total) if isinstance(total, int) else None


class _Template(string.Formatter):
    """``{input}``, ``{input[field]}``, ``{id}``, ``{metadata[...]}``: never the target."""


def render_prompt(template: str, task: Task) -> str:
    return _Template().vformat(
        template, (), {"input": task.input, "id": task.id, "metadata": task.metadata}
    )


def require_key(api_key_env: str | None, what: str) -> None:
    """Fail before any trial runs when the key's variable is missing (names it, not the key)."""
    if api_key_env and not os.environ.get(api_key_env):
        raise ConfigError(f"{what}: the API key variable {api_key_env!r} is not set")


class OpenAITarget:
    """A candidate is a prompt template (``prompt.md``) plus optional ``params.yaml``
    (``system``, ``temperature``, ``max_tokens``); the completion is the output."""

    enforces_timeout = True  # httpx's own timeout is timeout_s

    def __init__(self, cfg: OpenAITargetConfig, *, timeout_s: float):
        require_key(cfg.api_key_env, "adapter")
        self.prompt_file = cfg.prompt_file
        self.client = ChatClient(
            cfg.base_url,
            cfg.model,
            api_key_env=cfg.api_key_env,
            timeout_s=timeout_s,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
        )

    def _candidate(self, candidate: Candidate) -> tuple[str, dict[str, Any]]:
        root = Path(candidate.path)
        prompt = root / self.prompt_file if root.is_dir() else root
        params_file = root / "params.yaml" if root.is_dir() else None
        params = (
            yaml.safe_load(params_file.read_text()) or {}
            if params_file is not None and params_file.exists()
            else {}
        )
        return prompt.read_text(encoding="utf-8"), params

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        template, params = self._candidate(candidate)
        messages = []
        if params.get("system"):
            messages.append({"role": "system", "content": str(params["system"])})
        messages.append({"role": "user", "content": render_prompt(template, task)})
        reply = self.client.complete(
            messages,
            seed=seed,
            temperature=params.get("temperature"),
            max_tokens=params.get("max_tokens"),
        )
        return Rollout(output=reply.text, tokens=reply.tokens)


class OpenAITargetConfig(TargetConfig):
    """``kind: openai``: the candidate's prompt sent to an OpenAI-compatible chat endpoint."""

    kind: Literal["openai"]
    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    prompt_file: str = "prompt.md"

    def build(self, project: ProjectView) -> AdapterParts:
        return AdapterParts(OpenAITarget(self, timeout_s=project.config.timeout_s))

    def secret_env_names(self) -> list[str]:
        return [self.api_key_env] if self.api_key_env else []
