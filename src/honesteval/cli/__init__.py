"""The ``honesteval`` command line (typer): this module only registers the commands.

Each command group is a module of its own (``evaluate``, ``gate``, ``ledger``, ``project``,
``views``, ``server``, ``demo``); ``common`` and ``output`` are what they share; ``main`` is
the entry point (exit codes, one-line errors, the quick end of the process). A command's
heavy imports happen inside it, so ``honesteval --help`` stays quick.
"""

from __future__ import annotations

import typer

from honesteval.cli import (
    automations,
    demo,
    evaluate,
    gate,
    imports,
    ledger,
    project,
    server,
    views,
)
from honesteval.cli.main import command, main, top_level_options

__all__ = ["app", "command", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Honest, variance-aware evaluation and significance gating.",
)
app.callback()(top_level_options)
app.command("evaluate")(evaluate.evaluate_command)
app.command("check")(project.check_command)
app.command("gate")(gate.gate_command)
app.command("rescore")(evaluate.rescore_command)
app.command("finalize")(gate.finalize_command)
app.command("refreeze-splits")(project.refreeze_splits_command)
app.command("status")(views.status_command)

ledger_app = typer.Typer(
    no_args_is_help=True,
    help="The search ledger (decisions.jsonl): check it, repair it explicitly.",
)
ledger_app.command("verify")(ledger.verify_command)
ledger_app.command("repair")(ledger.repair_command)
app.add_typer(ledger_app, name="ledger")

automations_app = typer.Typer(
    no_args_is_help=True,
    help="Prefect automations on the project's events: install them on a long-lived server.",
)
automations_app.command("install")(automations.install_command)
app.add_typer(automations_app, name="automations")

app.command("plan")(gate.plan_command)
app.command("compare")(views.compare_command)
app.command("export")(views.export_command)
app.command("report")(views.report_command)
app.command("serve")(server.serve_command)
app.command("server")(server.server_command)
app.command("ui")(server.ui_command)
app.command("demo")(demo.demo_command)
app.command("init")(project.init_command)

import_app = typer.Typer(
    no_args_is_help=True,
    help="Store results run elsewhere as trials: `import inspect LOG...` (Inspect AI logs).",
)
import_app.command("inspect")(imports.inspect_command)
app.add_typer(import_app, name="import")
