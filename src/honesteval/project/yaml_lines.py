"""Map a pydantic error location back to a line of the YAML file it came from."""

from __future__ import annotations

from collections.abc import Sequence

import yaml


def line_of(text: str, loc: Sequence[int | str]) -> int | None:
    """1-based line of the deepest node of ``loc`` that exists in ``text`` (None if unknown)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    line = key.start_mark.line + 1
                    node = value
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line
