"""What `status` prints of objects the API server returned: values cleaned to one short word, conditions found
bounded (the objects are the cluster's, not deployctl's: untrusted)."""

from __future__ import annotations


def text(value: object) -> str:
    """A value the API server returned, as one short printable word."""
    from deployctl.core.textsafe import clean

    return clean(str(value if value is not None else ""), multiline=False)[:63]


def condition(obj: dict, kind: str) -> dict:
    """The condition of this type in an object's status ({} when it has none)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions[:16] if isinstance(c, dict) and c.get("type") == kind), {})


def count_line(obj: dict, what: str, ready: object, desired: object) -> str:
    """'<Kind> <name>: <ready>/<desired> <what> ready' of a workload object."""
    return (f"{text(obj.get('kind'))} {text((obj.get('metadata') or {}).get('name'))}: "
            f"{text(ready or 0)}/{text(desired)} {what} ready")
