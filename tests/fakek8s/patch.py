"""The three PATCH flavours of the Kubernetes API, on plain JSON values.

* `merge_patch`: RFC 7386 (application/merge-patch+json): maps merge recursively, null deletes, anything
  else (lists included) replaces.
* `strategic_merge_patch`: an approximation of application/strategic-merge-patch+json. The real one reads
  the patch strategy of every field from the Go types; here lists whose field name is in MERGE_KEYS (or
  whose items are all maps with a `name`) merge item by item on that key, other lists replace. Directives
  understood: `$patch: replace|delete` (map and list item), `$retainKeys`, `$setElementOrder/<field>`
  (reorders), `$deleteFromPrimitiveList/<field>`; any other `$...` key is dropped.
* `json_patch`: RFC 6902 (application/json-patch+json): add, remove, replace, move, copy, test.

All three return a new value and never modify their arguments. Errors raise PatchError.
"""

from __future__ import annotations

import copy

# field name -> merge key, as in the Kubernetes Go types (patchMergeKey). "ports" depends on the parent:
# container ports merge on containerPort, service ports on port (see _merge_key).
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "volumes": "name",
    "env": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath", "imagePullSecrets": "name",
    "conditions": "type", "ownerReferences": "uid", "hostAliases": "ip", "addresses": "type",
    "topologySpreadConstraints": "topologyKey", "resourceClaims": "name", "containerStatuses": "name",
}
PRIMITIVE_MERGE_LISTS = {"finalizers"}


class PatchError(ValueError):
    pass


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merge_key(field: str, items: list) -> str | None:
    if field == "ports":
        return "containerPort" if any(isinstance(i, dict) and "containerPort" in i for i in items) else "port"
    if field in MERGE_KEYS:
        return MERGE_KEYS[field]
    if items and all(isinstance(i, dict) and "name" in i for i in items):
        return "name"
    return None


def strategic_merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if patch.get("$patch") == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    orders = {k.split("/", 1)[1]: v for k, v in patch.items() if k.startswith("$setElementOrder/")}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [x for x in result[field] if x not in value]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _reorder(field, result[field], order)
    if "$retainKeys" in patch:
        keep = set(patch["$retainKeys"] or [])
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _merge_list(field: str, current, patch: list) -> list:
    if field in PRIMITIVE_MERGE_LISTS and isinstance(current, list):
        return current + [x for x in patch if x not in current]
    key = _merge_key(field, patch + (current if isinstance(current, list) else []))
    if key is None or not isinstance(current, list) or not all(isinstance(i, dict) for i in patch):
        if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
            return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
        return [strategic_merge_patch(None, i) if isinstance(i, dict) else copy.deepcopy(i) for i in patch
                if not (isinstance(i, dict) and i.get("$patch") == "delete")]
    if any(i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if "$patch" not in i]
    result = copy.deepcopy(current)
    for item in patch:
        index = next((n for n, old in enumerate(result)
                      if isinstance(old, dict) and old.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(strategic_merge_patch(None, item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _reorder(field: str, items: list, order: list) -> list:
    key = _merge_key(field, items)
    if key is None:
        position = {repr(v): n for n, v in enumerate(order)}
        return sorted(items, key=lambda v: position.get(repr(v), len(order)))
    position = {o.get(key): n for n, o in enumerate(order) if isinstance(o, dict)}
    return sorted(items, key=lambda v: position.get(v.get(key) if isinstance(v, dict) else None, len(order)))


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts: list[str], path: str):
    for p in parts:
        if isinstance(doc, dict) and p in doc:
            doc = doc[p]
        elif isinstance(doc, list) and p.isdigit() and int(p) < len(doc):
            doc = doc[int(p)]
        else:
            raise PatchError(f"path {path!r} does not exist")
    return doc


def _get(doc, path):
    return _walk(doc, _pointer(path), path)


def _remove(doc, path):
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchError(f"unable to remove nonexistent key {path!r}")


def _add(doc, path, value):
    parts = _pointer(path)
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"index {last!r} out of range in {path!r}")
    else:
        raise PatchError(f"path {path!r} does not name a container")
    return doc


def json_patch(target, operations):
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {kind} on {path!r} has no value")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            if _pointer(path):
                _get(doc, path)          # must exist
                _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "move":
            value = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc
