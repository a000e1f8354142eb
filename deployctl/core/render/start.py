"""Start scripts at fleet scale: the part naming the node rendered per node, the rest once per distinct body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deployctl.core.models.plan import Plan


def start_script(plan: Plan, template: str, head: Mapping[str, object],
                 body: Mapping[str, object]) -> str:
    """A node's start script from an engine's start.sh.j2: the head (shebang, the node's name and role in its
    comments, NAME/IMAGE/NODE) rendered with ``head``, the rest with ``body``, once per distinct ``body`` (the
    nodes of an instance share it: an 8,192-server plan renders 512 bodies). A value one part reads and the
    other is not given fails the render (StrictUndefined): a node's own value never reaches a shared body."""
    from deployctl.core.render._jinja import render_template

    # the body's values are plain data (text, numbers, booleans, None, lists and tuples of them): their repr
    # tells two bodies apart exactly, and is made in C (freezing them value by value cost more than the render)
    key = ("start-body", template, repr(sorted(body.items())))
    shared = plan.memo(key, lambda: render_template(template, part="body", **body))
    return render_template(template, part="head", **head) + shared
