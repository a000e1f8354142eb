"""One Jinja2 environment for text artifacts: StrictUndefined, and the filters every script value goes through.

* ``q``: shell-quote (shlex.quote); the only way a value reaches a shell script outside a comment;
* ``c``: for comments: control characters become ``?`` (a newline would end the comment);
* ``arg``: a value in an argument position (image, container name, path) that must not start with ``-``:
  ``docker run "$IMAGE"`` with IMAGE=--privileged would be an option, quoting or not.

Every other ``{{ }}`` output is checked by ``finalize``: a control character outside ``q`` fails the render
(tests/core/render/test_script_safety.py also checks that every expression in a ``*.sh.j2`` template is filtered).
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from typing import TYPE_CHECKING, Callable, NoReturn

if TYPE_CHECKING:
    import jinja2

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class Quoted(str):
    """The output of the ``q`` filter: already safe in a shell script (may hold quoted newlines)."""


def _fail(message: str) -> NoReturn:
    from deployctl.core.errors import RenderError

    raise RenderError(message, hint="deployctl validation should have refused this value; please report it")


def shell_quote(value: object) -> Quoted:
    return Quoted(shlex.quote(str(value)))


def comment(value: object) -> str:
    return CONTROL.sub("?", str(value))


def argument(value: object) -> str:
    text = str(value)
    if text.startswith("-") or not text:
        _fail(f"{text!r} cannot be a command-line argument (it would be read as an option)")
    return text


def _finalize(value: object) -> object:
    if isinstance(value, Quoted) or not isinstance(value, str):
        return value
    bad = CONTROL.search(value)
    if bad:
        _fail(f"a control character (U+{ord(bad.group()):04X}) in an unquoted template value: {value[:60]!r}")
    return value


@cache
def environment() -> jinja2.Environment:
    import jinja2

    def load(name: str) -> tuple[str, str, Callable[[], bool]]:
        from deployctl.core.packaged import packaged_text

        package, _, file = name.partition("/")     # "<package>/<path>": templates live with their engine
        source = packaged_text(package, file)
        return source, name, lambda: True

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(load), finalize=_finalize,
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters.update(q=shell_quote, c=comment, arg=argument)
    return env


def render_template(name: str, **context: object) -> str:
    import jinja2

    from deployctl.core.errors import RenderError

    try:
        return environment().get_template(name).render(**context)
    except jinja2.TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise RenderError(f"template {name}{f':{line}' if line else ''} failed: {exc}",
                          hint="this is a deployctl bug; please report it with --debug output") from None
