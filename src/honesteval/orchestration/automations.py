"""The automations a project's events are for, created through Prefect's automations API
(``honesteval automations install``): coverage low, a drifted best, a nightly that did not run.

Each is named for the project (``honesteval <project>: drift``), so a second install finds it
by name and updates it in place instead of adding a copy. Its action sends a notification
through a notification block when one is named (``--notify slack-webhook/oncall``), else it
does nothing but fire: the firing is in the automation's history in the UI and in the event
feed (``prefect.automation.triggered``, ``prefect.automation.action.executed``), for whoever
adds an action later. Automations run in a long-lived server only (``honesteval server``, or
yours at ``PREFECT_API_URL``): the CLI's own servers run without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

from prefect.events.actions import DoNothing, SendNotification
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

from honesteval.errors import ConfigError
from honesteval.orchestration.flows._events import (
    BEST_REEVALUATED,
    COVERAGE_LOW,
    DRIFT_DETECTED,
    candidate_resource,
    project_resource,
)

#: A nightly is scheduled once a day; it may start late or run long by this much before its
#: absence is news.
NIGHTLY_SLACK = timedelta(hours=2)


@dataclass(frozen=True)
class Installed:
    """One automation as the install left it."""

    name: str
    id: UUID
    created: bool  # False: an automation of this name was there and is updated


def automation_names(project_name: str) -> dict[str, str]:
    """What each automation is for -> its name."""
    return {
        "coverage": f"honesteval {project_name}: coverage low",
        "drift": f"honesteval {project_name}: drift",
        "nightly": f"honesteval {project_name}: nightly did not run",
    }


def project_automations(
    project_name: str, notify: UUID | None = None, nightly_slack: timedelta = NIGHTLY_SLACK
) -> list[AutomationCore]:
    """The project's three automations, each with the notification action when ``notify``
    (a notification block's id) is given, else one that only records its firing."""
    names = automation_names(project_name)
    project_id = project_resource(project_name)["prefect.resource.id"]
    # every candidate of the project (a trailing * matches any rest of the id)
    candidates = candidate_resource(project_name, "c", "")["prefect.resource.id"][:-1] + "*"
    triggers = {
        "coverage": EventTrigger(
            expect={COVERAGE_LOW},
            match={"prefect.resource.id": project_id},
            posture=Posture.Reactive,
            threshold=1,
        ),
        "drift": EventTrigger(
            expect={DRIFT_DETECTED},
            match={"prefect.resource.id": candidates},
            posture=Posture.Reactive,
            threshold=1,
        ),
        # Proactive: fires when the nightly's event has NOT come for a day and the slack.
        "nightly": EventTrigger(
            expect={BEST_REEVALUATED},
            match={"prefect.resource.id": project_id},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(days=1) + nightly_slack,
        ),
    }
    descriptions = {
        "coverage": f"A run of {project_name} scored under min_coverage of its tasks.",
        "drift": f"The nightly re-evaluation of {project_name}'s best found it drifted.",
        "nightly": (
            f"No re-evaluation of {project_name}'s best (reevaluate-best) within "
            f"{_hours(timedelta(days=1) + nightly_slack)} h."
        ),
    }
    subjects = {
        "coverage": f"honesteval {project_name}: coverage low",
        "drift": f"honesteval {project_name}: the best drifted",
        "nightly": f"honesteval {project_name}: the nightly did not run",
    }
    return [
        AutomationCore(
            name=names[what],
            description=descriptions[what],
            enabled=True,
            trigger=trigger,
            actions=[_action(notify, subjects[what])],
        )
        for what, trigger in triggers.items()
    ]


def _hours(span: timedelta) -> int:
    return round(span.total_seconds() / 3600)


def _action(notify: UUID | None, subject: str) -> Any:
    if notify is None:
        return DoNothing()
    body = "{{ event.event }} on {{ event.resource.id }}: {{ event.payload }}"
    return SendNotification(block_document_id=notify, subject=subject, body=body)


def notification_block(client: Any, name: str) -> UUID:
    """The id of the notification block ``type-slug/name`` (as ``prefect block ls`` shows it)."""
    from prefect.exceptions import ObjectNotFound

    type_slug, sep, block_name = name.partition("/")
    if not sep or not type_slug or not block_name:
        raise ConfigError(
            f"--notify takes a block as type/name (e.g. slack-webhook/oncall), got {name!r}"
        )
    try:
        block = client.read_block_document_by_name(block_name, block_type_slug=type_slug)
    except ObjectNotFound:
        raise ConfigError(
            f"no block {name!r} on this Prefect server (`prefect block ls`)"
        ) from None
    return UUID(str(block.id))


def install(
    api_url: str,
    project_name: str,
    notify: str | None = None,
    nightly_slack: timedelta = NIGHTLY_SLACK,
) -> list[Installed]:
    """Create the project's automations on the server at ``api_url``, or update those of the
    same names (one each: copies a user made by hand beyond the first are left as they are)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        block = None if notify is None else notification_block(client, notify)
        done = []
        for automation in project_automations(project_name, block, nightly_slack):
            existing = client.read_automations_by_name(automation.name)
            if existing:
                client.update_automation(existing[0].id, automation)
                done.append(Installed(automation.name, existing[0].id, created=False))
            else:
                new_id = client.create_automation(automation)
                done.append(Installed(automation.name, new_id, created=True))
    return done


__all__ = ["NIGHTLY_SLACK", "Installed", "automation_names", "install", "project_automations"]
