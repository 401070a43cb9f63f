"""An Inspect task for the tests, offline with ``mockllm/model``: the mock's answer depends
on the candidate's ``prompt.txt`` (a prompt with "careful" in it is right more often) and on
the seed; sample ``boom`` always errors (a provider fault) and sample ``long`` always hits
its token limit (the candidate's failure)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.model._generate_config import active_generate_config
from inspect_ai.scorer import match
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import LimitExceededError

#: Of ten draws, how many are right: a careful prompt, another one.
RIGHT_OF_TEN = {True: 8, False: 4}


def draw(prompt: str, sample_id: str, seed: int | None, epoch: int) -> int:
    """The mock's draw in 0..9 for a prompt, a sample, a seed and an epoch (the tests
    recompute it)."""
    digest = hashlib.sha256(f"{prompt}|{sample_id}|{seed}|{epoch}".encode()).hexdigest()
    return int(digest, 16) % 10


def right(prompt: str, sample_id: str, seed: int | None, epoch: int = 1) -> bool:
    """Whether the mock answers ``sample_id`` right."""
    return draw(prompt, sample_id, seed, epoch) < RIGHT_OF_TEN["careful" in prompt]


def _reply(input, tools, tool_choice, config):  # type: ignore[no-untyped-def]
    prompt, sample_id, epoch, target = input[-1].text.split("|")
    text = target if right(prompt, sample_id, config.seed, int(epoch)) else "wrong"
    output = ModelOutput.from_content("mockllm/model", text)
    output.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
    return output


@solver
def answer(candidate_dir: str):  # type: ignore[no-untyped-def]
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.sample_id == "boom":
            raise ConnectionError("provider unreachable")
        if state.sample_id == "long":
            raise LimitExceededError("token", value=5000, limit=4000)
        prompt = Path(candidate_dir, "prompt.txt").read_text().strip()
        model = get_model("mockllm/model", custom_outputs=_reply)
        seed = active_generate_config().seed
        message = f"{prompt}|{state.sample_id}|{state.epoch}|{state.target.text}"
        state.output = await model.generate(message, config=GenerateConfig(seed=seed))
        return state

    return solve


SAMPLES = [Sample(id=f"q{i}", input=f"{i} + {i}", target=str(2 * i)) for i in range(8)]


@task
def arith(candidate_dir: str = ".") -> Task:
    extra = [Sample(id="boom", input="x", target="y"), Sample(id="long", input="x", target="y")]
    return Task(dataset=[*SAMPLES, *extra], solver=[answer(candidate_dir)], scorer=match())
