"""A project's adapter assembled from its file: the kind's target and the scorer it asks for.

Apart from :mod:`honesteval.adapters._base` (the protocol the kinds build on) so that the
base imports no kind: the kinds import the base, this module imports both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from honesteval.adapters._base import ProjectAdapter, Scorer
from honesteval.adapters._python import PythonScorer
from honesteval.errors import ConfigError

if TYPE_CHECKING:
    from honesteval.adapters.project_view import ProjectView


def build_adapter(project: ProjectView) -> ProjectAdapter:
    """The adapter a project's file asks for: its kind's target, scored by the ``evaluation:``
    steps, else the adapter's ``scorer:``, else the scorer the kind brings."""
    cfg = project.config.adapter
    target, own_scorer = cfg.build(project)
    scorer: Scorer
    if project.config.evaluation is not None:
        from honesteval.adapters.eve._steps import StepsScorer

        scorer = StepsScorer(project)
    elif cfg.scorer is not None:
        scorer = PythonScorer(project.root, cfg.scorer)
    elif own_scorer is not None:
        scorer = own_scorer
    else:
        raise ConfigError(
            f"adapter kind {cfg.kind!r} brings no scorer: give the adapter"
            " 'scorer: module:function' or add an 'evaluation:' block"
        )
    return ProjectAdapter(project, target, scorer)
