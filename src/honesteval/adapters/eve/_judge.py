"""Judge steps: a judge works inside the trial's workspace and leaves its verdict in score.yaml.

Two kinds, chosen by the ``judge:`` block (:class:`honesteval.adapters.eve.config.JudgeConfig`):

* :class:`ChatJudge`: an OpenAI-compatible chat endpoint with three tools: ``list_files`` and
  ``read_file`` (read-only, confined to the workspace: a path that resolves outside it,
  through ``..``, an absolute path or a symlink, is refused and not read) and ``write_score``
  (a YAML/JSON mapping merged shallowly into score.yaml, as Eve merges a verdict). A final
  reply with a fenced YAML/JSON mapping counts as a verdict too (Eve's fallback). The turns
  and tokens of all judge steps of one trial share one budget; running out is a failure.
* :class:`CommandJudge`: an agent CLI (Eve's way) run in the workspace with the prompt on
  stdin or in a file; it writes score.yaml itself or prints a fenced verdict. Same timeout and
  process-group kill as a shell step.

A judge step's prompt (``ENTRYPOINT.md``) and rubric (its ``immutable`` files) are read once,
when the scorer is built (:class:`JudgeSnapshot`): every trial is judged from that copy, so a
candidate that edits the files during a run changes nothing it is judged by (the scorer
notices the edit and fails that trial). The step around the judge (:func:`run_judge_step`)
lands the snapshot's rubric in the workspace, read-only, checks that the judge left it as it
was, and keeps the judge's own score.yaml, transcript and status in its step folder; a
workspace file in the rubric's way is moved out of the workspace for the rest of the trial.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from honesteval.adapters._openai import ChatClient
from honesteval.adapters._process import run_isolated
from honesteval.adapters.eve.config import JudgeConfig
from honesteval.errors import InfraError
from honesteval.models import Rollout, Task
from honesteval.redaction import describe
from honesteval.retry import RetryPolicy

from ._evaluator_files import hash_tree, readable_files
from ._workspace import StepFailed, Workspace, remove, set_read_only, write_status

# A fence is a line of three or more backticks at the start of a line; an opening fence may
# carry an info string (```yaml), a closing fence carries nothing (CommonMark's rule, without
# its indentation). Matching line by line keeps a code block's closing fence from pairing with
# the verdict's opening fence.
_FENCE_LINE = re.compile(r"^(`{3,})[ \t]*([^`\s]*)[^`\n]*$")
_VERDICT_INFO = {"", "yaml", "yml", "json"}
_READ_CHARS = 20_000
_LIST_ENTRIES = 500
_TAIL = 500

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "list_files",
            "description": "List the files under a folder of the workspace ('.' is its root).",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "relative folder"}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": f"Read a text file of the workspace, {_READ_CHARS} characters "
            "from offset.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_score",
            "description": "Record your verdict: a YAML or JSON mapping whose top-level keys "
            "replace those of logs/evaluate/score.yaml.",
            "parameters": {
                "type": "object",
                "properties": {"verdict": {"type": "string"}},
                "required": ["verdict"],
            },
        },
    },
]

_TOOL_NOTE = (
    "\n\n# How you work\n\nYou judge inside a workspace: `solver/` is the candidate "
    "(read-only), `task.json` the task, `logs/evaluate/` the evaluation so far (score.yaml). "
    "Inspect it with list_files and read_file, then call write_score with your verdict."
)


@dataclass
class TrialBudget:
    """Turns and tokens left for the judge steps of one trial."""

    turns: int
    tokens: int | None
    used_turns: int = 0
    used_tokens: int = 0

    def spend(self, tokens: int | None) -> None:
        self.used_turns += 1
        self.used_tokens += tokens or 0
        if self.tokens is not None and self.used_tokens > self.tokens:
            raise StepFailed(
                f"the judge ran out of its token budget ({self.used_tokens} > "
                f"max_total_tokens={self.tokens} this trial)"
            )

    def exhausted(self) -> bool:
        return self.used_turns >= self.turns


@dataclass(frozen=True)
class JudgeSnapshot:
    """A judge step's prompt and rubric as they were when the scorer was built.

    ``rubric_files`` maps each rubric file's path (relative to the folder that holds the
    ``immutable`` file or folder, as it lands in the workspace) to its bytes. The hashes are
    those of the originals at that moment (:func:`hash_tree`), part of the evaluator
    fingerprint.
    """

    entrypoint: str
    rubric_files: dict[str, bytes]
    prompt_hash: str
    rubric_hash: str | None

    @classmethod
    def take(cls, prompt_dir: Path, immutable: Path | None) -> JudgeSnapshot:
        files: dict[str, bytes] = {}
        if immutable is not None:
            base = immutable.parent if immutable.is_file() else immutable
            for path in readable_files(immutable):
                files[path.relative_to(base).as_posix()] = path.read_bytes()
        return cls(
            entrypoint=(prompt_dir / "ENTRYPOINT.md").read_text(encoding="utf-8"),
            rubric_files=files,
            prompt_hash=hash_tree(prompt_dir),
            rubric_hash=None if immutable is None else hash_tree(immutable),
        )

    @property
    def rubric(self) -> str:
        """The rubric files as one text, each under its file name (the judge's prompt)."""
        return "\n\n".join(
            f"## {Path(rel).name}\n\n{content.decode('utf-8', errors='replace')}"
            for rel, content in self.rubric_files.items()
        )


@dataclass(frozen=True)
class JudgeCall:
    """What a judge step needs: where, what for, and where its logs go."""

    snapshot: JudgeSnapshot
    ws: Workspace
    task: Task
    rollout: Rollout
    step_dir: Path
    env: dict[str, str]
    seed: int | None
    budget: TrialBudget
    transcript: list[dict[str, Any]] = field(default_factory=list)


class Judge(Protocol):
    def run(self, call: JudgeCall) -> dict[str, Any] | None:
        """Judge once. Write score.yaml in place, or return a verdict to merge (or None)."""
        ...


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    r"""``(info string, body)`` of every fenced code block, in order.

    >>> fenced_blocks("```python\nx = 1\n```\nthen\n```yaml\nscore: 1\n```")
    [('python', 'x = 1'), ('yaml', 'score: 1')]
    """
    blocks: list[tuple[str, str]] = []
    opened: tuple[str, str, list[str]] | None = None  # (fence, info, body lines)
    for line in text.splitlines():
        fence = _FENCE_LINE.match(line)
        if opened is None:
            if fence is not None:
                opened = (fence.group(1), fence.group(2).lower(), [])
            continue
        closing = fence is not None and line.strip() == fence.group(1)  # no info string
        if fence is not None and closing and len(fence.group(1)) >= len(opened[0]):
            blocks.append((opened[1], "\n".join(opened[2])))
            opened = None
        else:
            opened[2].append(line)
    return blocks


def fenced_verdict(text: str) -> dict[str, Any] | None:
    """The last fenced YAML/JSON mapping in a reply (a block marked yaml, yml, json or not
    marked); blocks in other languages are skipped whole."""
    verdicts = [body for info, body in fenced_blocks(text) if info in _VERDICT_INFO]
    for block in reversed(verdicts):
        try:
            data = yaml.safe_load(block)  # JSON is YAML
        except yaml.YAMLError:
            continue
        if isinstance(data, dict):
            return data
    return None


def read_score(ws: Workspace) -> dict[str, Any]:
    text = ws.read(ws.score_path)
    if text is None:
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise StepFailed(f"score.yaml is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise StepFailed(f"score.yaml must be a mapping, got {type(data).__name__}")
    return data


def merge_verdict(ws: Workspace, verdict: dict[str, Any]) -> None:
    """Eve's merge: the verdict's top-level keys replace those already in score.yaml."""
    ws.write(ws.score_path, yaml.safe_dump({**read_score(ws), **verdict}, sort_keys=False))


# -- the chat judge ---------------------------------------------------------------------------
def inside(ws: Workspace, rel: object) -> Path | None:
    """The workspace path ``rel`` names, symlinks resolved; None when it leaves the workspace."""
    root = ws.root.resolve()
    path = (root / str(rel or ".")).resolve()
    return path if path.is_relative_to(root) else None


def _list_files(ws: Workspace, args: dict[str, Any]) -> str:
    folder = inside(ws, args.get("path", "."))
    if folder is None:
        return f"refused: {args.get('path')!r} is outside the workspace"
    if not folder.is_dir():
        return f"not a folder: {args.get('path')!r}"
    root = ws.root.resolve()
    lines = []
    for dirpath, dirnames, filenames in os.walk(folder):  # does not follow symlinked folders
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            size = path.lstat().st_size
            lines.append(f"{path.relative_to(root).as_posix()}  ({size} bytes)")
    more = f"\n... {len(lines) - _LIST_ENTRIES} more" if len(lines) > _LIST_ENTRIES else ""
    return "\n".join(lines[:_LIST_ENTRIES]) + more or "(empty)"


def _read_file(ws: Workspace, args: dict[str, Any]) -> str:
    path = inside(ws, args.get("path"))
    if path is None:
        return f"refused: {args.get('path')!r} is outside the workspace"
    if not path.is_file():
        return f"no such file: {args.get('path')!r}"
    offset = max(0, int(args.get("offset") or 0))
    text = path.read_text(encoding="utf-8", errors="replace")
    chunk = text[offset : offset + _READ_CHARS]
    rest = len(text) - offset - len(chunk)
    return chunk + (f"\n[... {rest} more characters: read again from offset]" if rest > 0 else "")


def _write_score(ws: Workspace, args: dict[str, Any]) -> str:
    raw = args.get("verdict")
    try:
        verdict = raw if isinstance(raw, dict) else yaml.safe_load(str(raw))
    except yaml.YAMLError as exc:
        return f"not valid YAML/JSON: {exc}"
    if not isinstance(verdict, dict):
        return "the verdict must be a mapping, e.g. {score: 0.8, summary: ...}"
    merge_verdict(ws, verdict)
    return "score.yaml updated"


_TOOL_FUNCTIONS = {"list_files": _list_files, "read_file": _read_file, "write_score": _write_score}


class ChatJudge:
    """The tool-using judge over an OpenAI-compatible chat endpoint."""

    def __init__(self, cfg: JudgeConfig):
        assert cfg.base_url is not None and cfg.model is not None  # checked by the schema
        self.cfg = cfg
        self.client = ChatClient(
            cfg.base_url,
            cfg.model,
            api_key_env=cfg.api_key_env,
            timeout_s=cfg.timeout_s,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
        )

    def run(self, call: JudgeCall) -> dict[str, Any] | None:
        so_far = call.ws.read(call.ws.score_path) or "{}"
        system = judge_prompt(call.snapshot)
        user = (
            f"# Task {call.task.id}\n\n```json\n{json.dumps(call.task.input, default=str)}\n"
            f"```\n\n# Output\n\n```json\n{json.dumps(call.rollout.output, default=str)}\n```"
            f"\n\n# score.yaml so far\n\n```yaml\n{so_far}\n```\n\n"
        )
        if self.cfg.tools:
            system += _TOOL_NOTE
            user += "Inspect the workspace, then call write_score with your verdict."
        else:
            user += "Reply with your verdict as a fenced YAML or JSON mapping."
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        tools = TOOLS if self.cfg.tools else None
        wrote = False
        while True:
            if call.budget.exhausted():
                raise StepFailed(
                    f"the judge used its {call.budget.turns} turns (max_turns) this trial "
                    "without finishing"
                )
            message, tokens = self._ask(messages, tools, call)
            call.budget.spend(tokens)
            calls = message.get("tool_calls") or []
            entry = {"role": "assistant", "content": message.get("content")}
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
            call.transcript.append(entry)
            if not calls:
                text = message.get("content") or ""
                call.ws.write(call.step_dir / "stdout.txt", text)
                return None if wrote else fenced_verdict(text)
            for tool_call in calls:
                result = self._tool(call.ws, tool_call)
                wrote = wrote or tool_call.get("function", {}).get("name") == "write_score"
                reply = {"role": "tool", "tool_call_id": tool_call.get("id"), "content": result}
                messages.append(reply)
                call.transcript.append(reply)

    @staticmethod
    def _tool(ws: Workspace, tool_call: dict[str, Any]) -> str:
        function = tool_call.get("function") or {}
        name = function.get("name")
        if name not in _TOOL_FUNCTIONS:
            return f"unknown tool {name!r}: use {', '.join(_TOOL_FUNCTIONS)}"
        try:
            args = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            return "arguments must be a JSON object"
        if not isinstance(args, dict):
            return "arguments must be a JSON object"
        try:
            return _TOOL_FUNCTIONS[name](ws, args)
        except (OSError, ValueError, TypeError) as exc:
            return f"{name} failed: {type(exc).__name__}: {exc}"

    def _ask(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, call: JudgeCall
    ) -> tuple[dict[str, Any], int | None]:
        policy = RetryPolicy(self.cfg.retries, self.cfg.retry_backoff_s)
        errors = []
        for attempt in range(1, self.cfg.retries + 2):
            try:
                return self.client.chat(messages, tools=tools, seed=call.seed)
            except InfraError as exc:
                errors.append(describe(exc))  # the one maker of error text: redacted
                if not policy.allows(attempt):
                    break
                time.sleep(policy.delay(attempt, getattr(exc, "retry_after", None)))
        call.ws.write(call.step_dir / "stderr.txt", "\n".join(errors) + "\n")
        raise StepFailed(f"judge unreachable after {len(errors)} attempt(s): {errors[-1]}")


# -- the command judge ------------------------------------------------------------------------
class CommandJudge:
    """An agent CLI run in the workspace: ``{prompt_file}`` and ``{python}`` in the command are
    replaced; the prompt also goes to stdin (``prompt: stdin``) or only to the file."""

    def __init__(self, cfg: JudgeConfig, timeout_s: float):
        assert cfg.command is not None
        self.argv = shlex.split(cfg.command) if isinstance(cfg.command, str) else cfg.command
        self.prompt_mode = cfg.prompt
        self.timeout_s = timeout_s

    def run(self, call: JudgeCall) -> dict[str, Any] | None:
        prompt_file = call.step_dir / "PROMPT.md"
        prompt = judge_prompt(call.snapshot)
        call.ws.write(prompt_file, prompt)
        argv = [
            sys.executable if a == "{python}" else a.replace("{prompt_file}", str(prompt_file))
            for a in self.argv
        ]
        try:
            done = run_isolated(
                argv,
                cwd=call.ws.root,
                env={**call.env, "HONESTEVAL_JUDGE_PROMPT": str(prompt_file)},
                stdin=prompt_file if self.prompt_mode == "stdin" else None,
                stdout=call.ws.real(call.step_dir / "stdout.txt"),
                stderr=call.ws.real(call.step_dir / "stderr.txt"),
                timeout_s=self.timeout_s,
            )
        except OSError as exc:
            raise StepFailed(
                f"cannot start the judge command {argv[0]!r}: {exc.strerror}"
            ) from None
        if done.timed_out:
            raise StepFailed(f"the judge command ran past {self.timeout_s:g} s")
        if done.returncode != 0:
            tail = (call.ws.read(call.step_dir / "stderr.txt") or "")[-_TAIL:].strip()
            raise StepFailed(f"the judge command exited {done.returncode}: {tail}")
        return fenced_verdict(call.ws.read(call.step_dir / "stdout.txt") or "")


def build_judge(cfg: JudgeConfig, timeout_s: float) -> Judge:
    return CommandJudge(cfg, timeout_s) if cfg.command is not None else ChatJudge(cfg)


# -- the step ---------------------------------------------------------------------------------
def judge_prompt(snapshot: JudgeSnapshot) -> str:
    """ENTRYPOINT.md, then the rubric under a heading: what either kind of judge is told."""
    rubric = snapshot.rubric
    return snapshot.entrypoint + (f"\n\n# Rubric\n\n{rubric}" if rubric else "")


def _land(snapshot: JudgeSnapshot, ws: Workspace, step_dir: Path) -> list[Path]:
    """Write the snapshot's rubric into the workspace root, read-only, as Eve lands a judge's
    immutable; return the top-level entries it made. A workspace entry in its way (a README.md
    or AGENTS.md the candidate wrote) is moved out of the workspace, beside it
    (:attr:`Workspace.set_aside`, one folder per step), for the rest of the trial: no later
    judge works in a folder holding it, and none can list or read it (Eve removes it)."""
    landed = []
    for top in sorted({rel.split("/", 1)[0] for rel in snapshot.rubric_files}):
        where = ws.root / top
        if where.exists() or where.is_symlink():
            kept = ws.set_aside / step_dir.name / top
            kept.parent.mkdir(parents=True, exist_ok=True)
            where.rename(kept)
        landed.append(where)
    for rel, content in snapshot.rubric_files.items():
        ws.write_bytes(ws.root / rel, content)
    for where in landed:
        set_read_only(where)
    return landed


def _landed_intact(snapshot: JudgeSnapshot, ws: Workspace) -> bool:
    for rel, content in snapshot.rubric_files.items():
        path = ws.root / rel
        if path.is_symlink() or not path.is_file() or path.read_bytes() != content:
            return False
    return True


def _unland(landed: list[Path]) -> None:
    for where in landed:
        if where.is_dir() and not where.is_symlink():
            remove(where)
        else:  # a read-only file goes too: its folder, the workspace root, is writable
            where.unlink(missing_ok=True)


def run_judge_step(judge: Judge, call: JudgeCall, *, name: str) -> None:
    """One judge step, judged from ``call.snapshot``; raises :class:`StepFailed` with the
    reason (status.txt says it too). A judge that changes the landed rubric fails the step."""
    step_dir, ws = call.step_dir, call.ws
    landed: list[Path] = []
    try:
        landed = _land(call.snapshot, ws, step_dir)
        before = ws.read(ws.score_path)
        verdict = judge.run(call)
        if not _landed_intact(call.snapshot, ws):
            raise StepFailed(f"judge step {name!r}: the immutable rubric changed during the step")
        after = ws.read(ws.score_path)
        if verdict is not None:
            merge_verdict(ws, verdict)
        elif after is None or after == before:
            raise StepFailed(
                f"judge step {name!r}: no verdict (no write_score, no score.yaml written, no "
                "fenced YAML/JSON mapping in the reply)"
            )
        ws.write(step_dir / "score.yaml", ws.read(ws.score_path) or "")  # each judge's own
        write_status(ws, step_dir, True, "verdict merged")
    except StepFailed as exc:
        write_status(ws, step_dir, False, str(exc))
        raise
    finally:
        _unland(landed)
        if call.transcript:
            ws.write(
                step_dir / "transcript.json", json.dumps(call.transcript, indent=1, default=str)
            )
