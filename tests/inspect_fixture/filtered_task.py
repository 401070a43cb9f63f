"""An Inspect task whose errors repeat per seed, as a content filter's do: the mock provider
refuses a (prompt, sample, seed) with probability ~8 % by a hash, every time it is asked, and
otherwise answers right by a draw (a prompt with "careful" in it more often). Offline with
``mockllm/model``; the tests recompute both draws."""

from __future__ import annotations

import hashlib
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.model._generate_config import active_generate_config
from inspect_ai.scorer import match
from inspect_ai.solver import Generate, TaskState, solver

#: Of a hundred draws, how many the filter refuses.
REFUSED_OF_100 = 8
#: Of ten draws, how many are right: a careful prompt, another one.
RIGHT_OF_TEN = {True: 8, False: 5}


def _draw(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest(), 16)


def refused(prompt: str, sample_id: str, seed: int | None) -> bool:
    """Whether the filter refuses this prompt on this sample at this seed (always the same)."""
    return _draw("filter", prompt, sample_id, seed) % 100 < REFUSED_OF_100


def right(prompt: str, sample_id: str, seed: int | None) -> bool:
    return _draw(prompt, sample_id, seed) % 10 < RIGHT_OF_TEN["careful" in prompt]


def _reply(input, tools, tool_choice, config):  # type: ignore[no-untyped-def]
    prompt, sample_id, target = input[-1].text.split("|")
    text = target if right(prompt, sample_id, config.seed) else "wrong"
    output = ModelOutput.from_content("mockllm/model", text)
    # usage given: the mock counts no tokens itself (that fetches an encoding, offline)
    output.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
    return output


@solver
def answer(candidate_dir: str):  # type: ignore[no-untyped-def]
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        prompt = Path(candidate_dir, "prompt.txt").read_text().strip()
        seed = active_generate_config().seed
        if refused(prompt, str(state.sample_id), seed):
            raise ConnectionError("content filter: the request was refused")
        model = get_model("mockllm/model", custom_outputs=_reply)
        message = f"{prompt}|{state.sample_id}|{state.target.text}"
        state.output = await model.generate(message, config=GenerateConfig(seed=seed))
        return state

    return solve


SAMPLES = [Sample(id=f"q{i}", input=f"{i} + {i}", target=str(2 * i)) for i in range(10)]


@task
def filtered(candidate_dir: str = ".") -> Task:
    return Task(dataset=SAMPLES, solver=[answer(candidate_dir)], scorer=match())
