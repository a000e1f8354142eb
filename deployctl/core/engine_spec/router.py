"""What a router in front of the instances answers during a rolling update and a recovery (the engine's own router, or
deployctl's HAProxy): the interface both implement, and the notes they keep about answers that were no count."""

from __future__ import annotations

from typing import Protocol


class InFlightNotes:
    """``unknown``: instance -> why its requests in flight could not be told at the last ``in_flight`` (a gauge or
    count that is not one), for the message of a drain that does not end. A bad number is a finding about that
    host (``in_flight`` says ``NOT_IDLE``), never an exception."""

    @property
    def unknown(self) -> dict[str, str]:
        found = self.__dict__.get("_unknown")
        if found is None:
            found = self.__dict__["_unknown"] = {}
        return found

    def told(self, instance: str, why: str = "") -> None:
        if why:
            self.unknown[instance] = why
        else:
            self.unknown.pop(instance, None)


class RouterRemote(Protocol):
    """What a router control needs of the hosts (deployctl/backends/hosts/router_control.py Remote): an HTTP request
    sent from one node, answered with (HTTP status, body); status 0 when nothing answered."""

    def http(self, node: str, method: str, url: str, body: str | None = None) -> tuple[int, str]: ...


class RouterControl(Protocol):
    what: str                                   # "HAProxy on node1" (for messages)

    @property
    def unknown(self) -> dict[str, str]: ...    # instance -> why its requests in flight cannot be told (read-only:
                                                # InFlightNotes keeps it)

    def routed(self) -> list[str]: ...          # the instances it can take out and put back
    def drain(self, instance: str) -> None: ...
    def in_flight(self, instance: str) -> int: ...    # requests still running on it (0: idle)
    def ready(self, instance: str) -> None: ...
    def serving(self, instance: str) -> bool: ...     # the router sends new requests to it again
    def view(self) -> dict[str, str]: ...       # instance -> what the router says (UP, DOWN, DRAIN, ...)
