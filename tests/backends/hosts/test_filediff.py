"""filediff: key-level changes between a deployed file and its re-rendered version (pure)."""

from __future__ import annotations

import json
import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from conftest import ROOT
from deployctl.core.filediff import KeyChange, file_changes, file_format, is_secret, parse_env

GOLDEN = ROOT / "tests" / "golden" / "a2-2x8-tp-pp" / "node1"


def lines(changes) -> list[str]:
    return [str(c) for c in changes]


def config(**edits) -> dict:
    doc = json.loads((GOLDEN / "config.json").read_bytes())
    for path, value in edits.items():
        *parents, last = path.split("__")
        node = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[last] = value
    return doc


def dump(doc) -> bytes:
    return json.dumps(doc, indent=4, ensure_ascii=False).encode()


def env_with(**values: str) -> bytes:
    text = (GOLDEN / "env").read_bytes()
    for name, value in values.items():
        text, n = re.subn(rb"(?m)^" + name.encode() + rb"=.*$", f"{name}={value}".encode(), text)
        assert n == 1, name
    return text


# ------------------------------------------------------------------------------------------------- JSON

def test_nested_config_json_changes_name_the_key_path_with_old_and_new_values():
    old = config(BackendConfig__ScheduleConfig__maxBatchSize=32,
                 BackendConfig__ModelDeployConfig__ModelConfig__0__tp=8)
    new = config(BackendConfig__ScheduleConfig__maxBatchSize=64,
                 BackendConfig__ModelDeployConfig__ModelConfig__0__tp=16)
    new["ServerConfig"]["ipAddress"] = "10.200.2.9"
    changes = file_changes("config.json", dump(old), dump(new))
    assert lines(changes) == [
        "BackendConfig.ModelDeployConfig.ModelConfig[0].tp: 8 → 16",
        "BackendConfig.ScheduleConfig.maxBatchSize: 32 → 64",
        'ServerConfig.ipAddress: "10.200.2.2" → "10.200.2.9"',
    ]
    assert changes[1] == KeyChange("BackendConfig.ScheduleConfig.maxBatchSize", "32", "64")


def test_the_real_rendered_file_against_itself_and_a_reformatted_copy_is_no_change():
    raw = (GOLDEN / "config.json").read_bytes()
    assert file_changes("config.json", raw, raw) == []
    doc = json.loads(raw)
    reordered = json.dumps(dict(reversed(list(doc.items()))), separators=(",", ":")).encode()
    assert reordered != raw
    assert file_changes("node1/config.json", raw, reordered) == []


def test_added_and_removed_keys_and_subtrees_are_flattened_to_leaves():
    old = {"a": {"keep": 1, "gone": {"x": 1, "y": [1, 2]}}, "list": [1, 2, 3]}
    new = {"a": {"keep": 1, "new": {"z": True}, "empty": {}}, "list": [1, 5]}
    assert lines(file_changes("c.json", dump(old), dump(new))) == [
        "a.empty: (absent) → {}",
        "a.gone.x: 1 → (removed)",
        "a.gone.y[0]: 1 → (removed)",
        "a.gone.y[1]: 2 → (removed)",
        "a.new.z: (absent) → true",
        "list[1]: 2 → 5",
        "list[2]: 3 → (removed)",
    ]


def test_types_are_compared_not_just_values_and_containers_show_as_compact_json():
    old = {"i": 1, "b": True, "s": "1", "t": {"a": 1, "b": [1, 2]}, "n": None}
    new = {"i": 1.0, "b": 1, "s": 1, "t": [1, 2], "n": None}
    assert lines(file_changes("c.json", dump(old), dump(new))) == [
        "b: true → 1",
        "i: 1 → 1.0",
        's: "1" → 1',
        't: {"a":1,"b":[1,2]} → [1,2]',
    ]


def test_list_indexes_sort_numerically_and_odd_keys_are_quoted():
    old = {"l": list(range(12)), "a.b": 1, "": 2, "x y": 3}
    new = {"l": [*range(9), 90, 10, 110], "a.b": 5, "": 3, "x y": 4}
    assert lines(file_changes("c.json", dump(old), dump(new))) == [
        '[""]: 2 → 3',
        '["a.b"]: 1 → 5',
        "l[9]: 9 → 90",
        "l[11]: 11 → 110",
        "x y: 3 → 4",
    ]


def test_new_file_reports_every_key_added_and_a_deleted_file_every_key_removed():
    doc = b'{"Version": "1.0.0", "LogConfig": {"logLevel": "Info", "files": ["a", "b"]}}'
    assert lines(file_changes("ms_coordinator.json", None, doc)) == [
        'LogConfig.files[0]: (absent) → "a"',
        'LogConfig.files[1]: (absent) → "b"',
        'LogConfig.logLevel: (absent) → "Info"',
        'Version: (absent) → "1.0.0"',
    ]
    assert lines(file_changes("ms_coordinator.json", doc, None)) == [
        'LogConfig.files[0]: "a" → (removed)',
        'LogConfig.files[1]: "b" → (removed)',
        'LogConfig.logLevel: "Info" → (removed)',
        'Version: "1.0.0" → (removed)',
    ]
    assert lines(file_changes("x.json", None, b"[]")) == ["(root): (absent) → []"]
    assert file_changes("x.json", None, None) == []


def test_invalid_json_falls_back_to_a_line_diff():
    old = b'{\n  "maxBatchSize": 32,\n  "port": 1025\n}\n'
    new = b'{\n  "maxBatchSize": 64,\n  "port": 1025,\n}\n'          # trailing comma: not JSON
    assert lines(file_changes("config.json", old, new)) == [
        'line 2: "maxBatchSize": 32, → "maxBatchSize": 64,',
        'line 3: "port": 1025 → "port": 1025,',
    ]
    assert lines(file_changes("config.json", b"\xff\xfe{", b"{}")) == ["line 1: \ufffd\ufffd{ → {}"]


# -------------------------------------------------------------------------------------------------- env

def test_env_change_added_and_removed_variables():
    old = env_with(HCCL_BUFFSIZE="120")
    new = env_with(HCCL_BUFFSIZE="1050").replace(b"OMP_NUM_THREADS=1\n", b"") + b"ATB_LLM_NEW_FLAG=1\n"
    changes = file_changes("env", old, new)
    assert lines(changes) == [
        "env ATB_LLM_NEW_FLAG: (absent) → 1",
        "env HCCL_BUFFSIZE: 120 → 1050",
        "env OMP_NUM_THREADS: 1 → (removed)",
    ]
    assert changes[1] == KeyChange("env HCCL_BUFFSIZE", "120", "1050")
    assert file_changes("node1/env", old, old) == []


def test_env_is_read_the_way_docker_env_file_reads_it():
    rendered = (GOLDEN / "env").read_text()
    parsed = parse_env(rendered)
    assert parsed["HCCL_BUFFSIZE"] and parsed["HTTPS_PROXY"] == ""
    assert not any(k.startswith("#") for k in parsed)
    # comments, blank lines, leading whitespace, CRLF and a BOM are not content; the value is verbatim
    # (docker strips no quotes and no trailing spaces); the last line for a name wins
    old = b"# header\nA=1\nB=x\nC=same\n"
    new = b"\xef\xbb\xbf\r\n  # moved\r\n   A=1\r\nB=\"x\"\r\nC=old\r\nC=same\r\n\r\n"
    assert lines(file_changes("env", old, new)) == ['env B: x → "\\"x\\""']
    assert lines(file_changes("prefill.env", b"A=1\n", b"A=1 \nB\n")) == [
        'env A: 1 → "1 "',
        "env B: (absent) → (from the host environment)",
    ]
    assert lines(file_changes("env", b"URL=a=b\n", b"URL=a=c\n")) == ["env URL: a=b → a=c"]
    assert lines(file_changes("env", b"EMPTY=\n", b"EMPTY=set\n")) == ['env EMPTY: "" → set']


def test_env_file_docker_would_refuse_falls_back_to_a_line_diff():
    old = b"A=1\nB=2\n"
    new = b"A=1\nBAD NAME=2\n"
    assert lines(file_changes("env", old, new)) == ["line 2: B=2 → BAD NAME=2"]


# -------------------------------------------------------------------------------------------------- YAML

def test_yaml_nested_dict_and_list_changes():
    old = b"""# comment
engine:
  image: mindie:2.1
  env: {HCCL_BUFFSIZE: 120}
  ports: [1025, 1026]
nodes:
  - name: node1
    devices: [0, 1]
  - name: node2
"""
    new = b"""engine:
  image: mindie:2.2   # upgraded
  env: {HCCL_BUFFSIZE: 1050, NEW: true}
  ports: [1025]
nodes:
  - name: node1
    devices: [0, 1, 2]
  - name: node2
  - name: node3
"""
    assert lines(file_changes("inventory.yaml", old, new)) == [
        "engine.env.HCCL_BUFFSIZE: 120 → 1050",
        "engine.env.NEW: (absent) → true",
        'engine.image: "mindie:2.1" → "mindie:2.2"',
        "engine.ports[1]: 1026 → (removed)",
        "nodes[0].devices[2]: (absent) → 2",
        'nodes[2].name: (absent) → "node3"',
    ]
    assert file_changes("values.yml", old, old.replace(b"# comment\n", b"")) == []


def test_unparsable_yaml_and_an_alias_bomb_fall_back_to_lines_without_hanging():
    assert lines(file_changes("a.yaml", b"a: 1\n", b"a: [1\n")) == ["line 1: a: 1 → a: [1"]
    bomb = b'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + b"".join(
        b"%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n" % ((ord("b") + i, ord("b") + i) + (ord("a") + i,) * 9)
        for i in range(8))
    start = time.monotonic()
    changes = file_changes("bomb.yaml", b"a: 1\n", bomb)
    assert time.monotonic() - start < 10
    assert changes[0] == KeyChange("line 1", "a: 1", 'a: &a ["x","x","x","x","x","x","x","x","x"]')


# ------------------------------------------------------------------------------------------ other files

def test_start_sh_line_changes_are_numbered_by_the_new_file():
    old = (GOLDEN / "start.sh").read_text()
    assert "--shm-size=500g" in old and "set -euo pipefail\n" in old
    new = old.replace("--shm-size=500g", "--shm-size=1000g").replace(
        "set -euo pipefail\n", "set -euo pipefail\nexport LOG_DIR=/var/log/mindie\n")
    new = new.replace('echo "started $NAME', 'echo "launched $NAME')
    shm_old = next(line for line in old.splitlines() if "--shm-size" in line).strip()
    n_set = new.splitlines().index("set -euo pipefail") + 1
    n_shm = next(i for i, line in enumerate(new.splitlines(), 1) if "--shm-size=1000g" in line)
    n_echo = next(i for i, line in enumerate(new.splitlines(), 1) if line.startswith('echo "launched'))
    assert lines(file_changes("start.sh", old.encode(), new.encode())) == [
        f"line {n_set + 1}: (absent) → export LOG_DIR=/var/log/mindie",
        f"line {n_shm}: {shm_old} → {shm_old.replace('500g', '1000g')}",
        f'line {n_echo}: echo "started $NAME on $NODE; follow it with: docker logs -f $NAME" → '
        f'echo "launched $NAME on $NODE; follow it with: docker logs -f $NAME"',
    ]


def test_removed_lines_use_the_old_numbers_and_whitespace_changes_are_quoted():
    old = b"a\nb\nc\nd\n"
    new = b"a\nc\n  d\n"
    assert lines(file_changes("start.sh", old, new)) == [
        "line 2: b → (removed)",
        'line 3: "d" → "  d"',
    ]
    assert file_changes("start.sh", b"a\nb\n", b"a\r\nb") == []       # line endings only


def test_binary_content_has_no_summary():
    assert file_changes("weights.bin", b"\x00\x01", b"\x00\x02") is None
    assert file_changes("config.json", b"{}", b"\x00") is None


# ------------------------------------------------------------------------------------------------ secrets

def test_secret_values_are_masked_but_the_change_is_reported():
    old = env_with(HCCL_BUFFSIZE="120") + b"HF_TOKEN=hf_old\nDB_PASSWORD=old\nMONKEYS=3\n"
    new = env_with(HCCL_BUFFSIZE="120") + b"HF_TOKEN=hf_new\nMONKEYS=4\nAPI_KEY=sk-123\n"
    changes = file_changes("env", old, new)
    assert lines(changes) == [
        "env API_KEY: (absent) → ***",
        "env DB_PASSWORD: *** → (removed)",
        "env HF_TOKEN: *** → ***",
        "env MONKEYS: 3 → 4",
    ]
    assert "hf_" not in repr(changes) and "sk-" not in repr(changes)


def test_secrets_in_nested_json_under_a_secret_parent_and_inside_compact_containers():
    old = {"ServerConfig": {"tokenTimeout": 600, "credentials": {"user": "u", "pw": "a"}, "tls": "x"},
           "maxPrefillTokens": 8192}
    new = {"ServerConfig": {"tokenTimeout": 900, "credentials": {"user": "v", "pw": "b"},
                            "tls": {"certFile": "c.pem", "privateKey": "PRIVATE"}},
           "maxPrefillTokens": 16384}
    changes = file_changes("config.json", dump(old), dump(new))
    assert lines(changes) == [
        "ServerConfig.credentials.pw: *** → ***",
        "ServerConfig.credentials.user: *** → ***",
        'ServerConfig.tls: "x" → {"certFile":"c.pem","privateKey":"***"}',
        "ServerConfig.tokenTimeout: 600 → 900",
        "maxPrefillTokens: 8192 → 16384",
    ]
    assert "PRIVATE" not in repr(changes)


def test_a_line_diff_masks_lines_that_assign_a_secret():
    old = b"docker run -e HF_TOKEN=hf_aaa img\nserve --api-key sk-1 --port 1\n{\"password\": \"p1\",\n"
    new = b"docker run -e HF_TOKEN=hf_bbb img\nserve --api-key sk-2 --port 2\n{\"password\": \"p2\",\n"
    assert lines(file_changes("start.sh", old, new)) == [
        "line 1: *** → ***", "line 2: *** → ***", "line 3: *** → ***"]
    assert lines(file_changes("start.sh", b"--key-file /a\n", b"--key-file /b\n")) == [
        "line 1: --key-file /a → --key-file /b"]


def test_secret_names_are_matched_by_words_not_substrings():
    for name in ("HF_TOKEN", "apiKey", "API_KEY", "DB_PASSWORD", "client-secret", "AWS_SECRET_ACCESS_KEY",
                 "credentials", "token", "PASSWD", "privateKey", "APIKey", "apikey", "password1"):
        assert is_secret(name), name
    for name in ("MONKEYS", "KEYBOARD", "maxFirstTokenWaitTime", "tokenizerProcessNumber", "maxPrefillTokens",
                 "kv_bytes_per_token", "key", "keys", "KEY_", "tokenTimeout", "KEY_FILE", "PASSWORD_PATH",
                 "secretKeyRef", "secretName", "HCCL_BUFFSIZE", "tlsPk", "PWD"):
        assert not is_secret(name), name


# -------------------------------------------------------------------------------------------------- limit

def test_limit_keeps_the_first_changes_and_counts_the_rest():
    old = b"".join(b"V%02d=1\n" % i for i in range(60))
    new = b"".join(b"V%02d=2\n" % i for i in range(60))
    changes = file_changes("env", old, new)
    assert len(changes) == 51 and str(changes[49]) == "env V49: 1 → 2"
    assert changes[-1] == KeyChange("…", None, "10 more changes") and changes[-1].is_more
    assert str(changes[-1]) == "… 10 more changes"
    assert lines(file_changes("env", old, new, limit=2)) == ["env V00: 1 → 2", "env V01: 1 → 2",
                                                              "… 58 more changes"]
    assert lines(file_changes("env", old[:14], new[:14], limit=1)) == ["env V00: 1 → 2", "… 1 more change"]
    assert len(file_changes("env", old, new, limit=60)) == 60
    assert not any(c.is_more for c in file_changes("env", old, new, limit=60))


def test_key_change_strings():
    assert str(KeyChange("X", None, "1")) == "X: (absent) → 1"
    assert str(KeyChange("X", "1", None)) == "X: 1 → (removed)"
    assert str(KeyChange("env HCCL_BUFFSIZE", "120", "1050")) == "env HCCL_BUFFSIZE: 120 → 1050"


def test_format_comes_from_the_file_name():
    assert [file_format(n) for n in ("node1/config.json", "X.JSON", "env", "d1/env", "a.env", "v.yaml",
                                     "v.yml", "start.sh", "ranktable", "environment")] == [
        "json", "json", "env", "env", "env", "yaml", "yaml", "lines", "lines", "lines"]


@settings(max_examples=examples(300), deadline=None)
@given(name=st.sampled_from(["config.json", "env", "a.yaml", "start.sh"]),
       old=st.one_of(st.none(), st.binary(max_size=200), st.text(max_size=200).map(str.encode)),
       new=st.one_of(st.none(), st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_never_raises(name, old, new):
    out = file_changes(name, old, new, limit=5)
    assert out is None or (len(out) <= 6 and all(isinstance(c, KeyChange) for c in out))
    if old == new:
        assert out == []
