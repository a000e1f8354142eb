"""Secrets: the one definition of which values deployctl never shows or writes in clear.

A value is secret when its key name looks like it holds one (:func:`is_secret`: ``HF_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``) or, for env variables, when the inventory lists the name under
``engine.secret_env``. Secret env values reach only the host's env file (mode 0600) and, on Kubernetes,
a Secret; everywhere else (``diff``, ``plan.json``, ``plan --output json``, run records, the archives in
them, ``values.yaml``) they read :data:`MASK`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import re

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan

MASK = "***"

# Secret wherever they appear in a name (unless the name ends in an _ABOUT_TAIL word) ...
_STRONG = frozenset({"password", "passwd", "passphrase", "secret", "secrets", "credential", "credentials"})
# ... and only as the name's last word: `token` is mostly about LLM tokens (maxFirstTokenWaitTime,
# kv_bytes_per_token), `key` about map keys; HF_TOKEN, apiKey, AWS_SECRET_ACCESS_KEY end in them.
_WEAK = frozenset({"token", "key", "keys", "apikey", "privatekey"})
# A name that ends in one of these is *about* a secret (where it is, how long it lives), not the secret.
_ABOUT_TAIL = frozenset({"path", "paths", "file", "files", "dir", "name", "names", "id", "ref", "timeout",
                         "size", "len", "length", "type", "count", "num", "number", "enabled", "enable",
                         "mode", "policy", "format", "url", "uri", "ttl", "expiry", "expires", "header"})
_COMPONENT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")


def _components(name: str) -> list[str]:
    return [c.lower() for c in _COMPONENT.findall(name)]


def is_secret(name: str) -> bool:
    """Whether a key name looks like it holds a secret, judged by its words (split at ``_ - .``, digits
    and camelCase), never by substrings: ``MONKEYS`` has no word ``keys``.

    * password, passwd, passphrase, secret(s), credential(s) anywhere: ``DB_PASSWORD``,
      ``client-secret``, ``SECRET_KEY_BASE``, ``credentials``;
    * token, key(s), apikey as the last word: ``HF_TOKEN``, ``apiKey``, ``AWS_SECRET_ACCESS_KEY``,
      but not ``maxFirstTokenWaitTime``, ``tokenizerProcessNumber``, ``maxPrefillTokens``, nor
      ``kv_bytes_per_token`` (a ``per`` rate), nor a bare ``key``/``keys`` (the schema word of label
      selectors and tolerations: ``key: huawei.com/Ascend910``);
    * never a name whose last word says it is *about* a secret: ``tokenTimeout``, ``KEY_FILE``,
      ``PASSWORD_PATH``, ``secretKeyRef``, ``secretName``.

    Paths to key files named like ``tls_key``/``tls_passwd`` are masked too: the name cannot tell.
    """
    parts = _components(name)
    if not parts or parts[-1] in _ABOUT_TAIL:
        return False
    if any(p in _STRONG for p in parts):
        return True
    if len(parts) == 1:
        return parts[0] in ("token", "apikey", "privatekey")
    return parts[-1] in _WEAK and "per" not in parts


def redact(value: Any) -> Any:
    """A container with the values of its secret-looking keys replaced by ***."""
    if isinstance(value, dict):
        return {k: MASK if is_secret(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------- env variables

def declared(inv: Inventory) -> frozenset[str]:
    """The env names the inventory declares secret (``engine.secret_env``)."""
    return frozenset(getattr(inv.engine, "secret_env", None) or ())


def is_secret_env(name: str, extra: frozenset[str] | set[str] = frozenset()) -> bool:
    """An env variable whose value is secret: it looks like one, or the inventory says so."""
    return name in extra or is_secret(name)


def secret_env_names(inv: Inventory) -> frozenset[str]:
    """Every secret variable of the inventory's env blocks (engine.env, layout.<role>.env)."""
    from deployctl.core.input.envcheck import env_sources

    extra = declared(inv)
    return frozenset(k for _, env in env_sources(inv) for k in env if is_secret_env(k, extra)) | extra


def mask_env(env: dict, extra: frozenset[str] | set[str] = frozenset()) -> dict:
    """``env`` with its secret values replaced by ***."""
    return {k: MASK if is_secret_env(str(k), extra) else v for k, v in env.items()}


def mask_env_text(text: str, extra: frozenset[str] | set[str] = frozenset()) -> str:
    """An env file (KEY=VALUE lines) with its secret values replaced by ***; comments kept."""
    out = []
    for line in text.split("\n"):
        name, eq, _ = line.partition("=")
        stripped = name.strip()
        if eq and not stripped.startswith("#") and is_secret_env(stripped, extra):
            line = f"{name}={MASK}"
        out.append(line)
    return "\n".join(out)


def mask_artifacts(artifacts: list, extra: frozenset[str] | set[str] = frozenset()) -> list:
    """Rendered artifacts with the secret values of their env files masked (for records, never for hosts)."""
    out = []
    for a in artifacts:
        if a.kind == "env":
            a = a.model_copy(update={"content": mask_env_text(a.content.decode(), extra).encode()})
        out.append(a)
    return out


def plan_doc(plan: Plan) -> dict:
    """The plan as JSON data, every secret env value masked: what ``plan.json`` and ``plan --output json``
    show (the real values stay in the inventory and reach only the env files)."""
    doc = plan.model_dump(mode="json")
    extra = declared(plan.inventory)
    inv = doc.get("inventory") or {}
    blocks = [inv.get("engine") or {}] + [r for r in ((inv.get("layout") or {}).get(role)
                                                      for role in ("prefill", "decode")) if isinstance(r, dict)]
    for block in blocks:
        if isinstance(block.get("env"), dict):
            block["env"] = mask_env(block["env"], extra)
    return doc


def plan_json(plan: Plan, more: dict | None = None) -> bytes:
    """``plan_doc`` with the keys of ``more`` after the plan's (values: JSON data or models) as two-space indented
    JSON (plan.json, `plan --output json`). A plan with no secret env value is serialised from the model by
    pydantic-core in one pass (the same text; an 8,192-server plan is 45 MB of it)."""
    from pydantic_core import to_json

    from deployctl.core.input.envcheck import env_sources

    extra = declared(plan.inventory)
    if any(is_secret_env(str(k), extra) for _, env in env_sources(plan.inventory) for k in env):
        doc = plan_doc(plan)
        doc.update(more or {})
        return to_json(doc, indent=2)
    if not more:
        return plan.model_dump_json(indent=2).encode()
    fields = {}
    for name, info in type(plan).model_fields.items():
        value = getattr(plan, name)
        if info.exclude is True or (info.exclude_if is not None and info.exclude_if(value)):
            continue
        fields[name] = value
    return to_json({**fields, **more}, indent=2)


# ------------------------------------------------------------------------------------------- file modes

