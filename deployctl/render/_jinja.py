"""One Jinja2 environment for text artifacts: StrictUndefined, shell quoting filter `q`."""

from __future__ import annotations

import shlex
from functools import cache


@cache
def environment():
    import jinja2

    def load(name: str):
        from importlib import resources

        source = resources.files("deployctl.templates").joinpath(name).read_text(encoding="utf-8")
        return source, name, lambda: True

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["q"] = lambda v: shlex.quote(str(v))
    return env


def render_template(name: str, **context) -> str:
    import jinja2

    from deployctl.errors import RenderError

    try:
        return environment().get_template(name).render(**context)
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise RenderError(f"template {name}{f':{line}' if line else ''} failed: {exc}",
                          hint="this is a deployctl bug; please report it with --debug output") from None
