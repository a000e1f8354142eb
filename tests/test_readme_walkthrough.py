"""The README's walk-through (write hosts → plan → preflight → render → up → status → diff → up → history → rollback → down)
runs exactly as written, on a simulated cluster, from a fresh working directory with default options.

Only the cluster's directory (/tmp/fc) is replaced by a temporary one; `.venv` and `scripts` are links to
this checkout, as they are in the README's working directory (the checkout itself)."""

from __future__ import annotations

import re
import subprocess

from conftest import ROOT
from fakecluster.fixtures import require_fake_cluster_support


def walkthrough() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- walkthrough:begin -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    body = block.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in body.splitlines() if line.strip()]


def test_readme_walkthrough_runs_as_written(tmp_path):
    require_fake_cluster_support()
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    (work / "scripts").symlink_to(ROOT / "scripts")
    fc = tmp_path / "fc"
    outputs = []
    try:
        for line in walkthrough():
            cmd = line.replace("/tmp/fc", str(fc))
            res = subprocess.run(["bash", "-c", cmd], cwd=work, capture_output=True, text=True, timeout=600,
                                 env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "COLUMNS": "200", "NO_COLOR": "1"})
            outputs.append((line, res.stdout + res.stderr))
            assert res.returncode == 0, f"`{line}` exited {res.returncode}:\n{res.stdout}\n{res.stderr}"
    finally:
        subprocess.run([str(ROOT / "scripts" / "fake-cluster"), "down", "--dir", str(fc)], capture_output=True)
    out = dict((line.split("#")[0].strip(), text) for line, text in outputs)
    assert "needs facts" in out[".venv/bin/deployctl preflight -i my.yaml"].lower() or \
        "device ip" in out[".venv/bin/deployctl preflight -i my.yaml"].lower()
    planned = out[".venv/bin/deployctl plan -i my.yaml"]          # before any host was probed
    assert "left to preflight: device IPs of every device of 2 node(s)" in planned and "KV budget" in planned
    rendered = out[".venv/bin/deployctl render -i my.yaml -o rendered"]     # after: preflight's facts, unasked
    assert "using device IPs and SDIDs from preflight run" in rendered, rendered
    assert '"device_ip"' in (work / "rendered" / "node2" / "ranktable.json").read_text()
    first_up = [t for line, t in outputs if line.startswith(".venv/bin/deployctl up")][0]
    assert "using device IPs" in first_up and "✓ serving (verified on every node)" in first_up
    statuses = [t for line, t in outputs if line.startswith(".venv/bin/deployctl status")]
    assert "✓ serving" in statuses[0] and "✓ serving" in statuses[1]
    assert "MINDIE_LOG_LEVEL: info → debug" in out[".venv/bin/deployctl diff -i my.yaml"]
    history = out[".venv/bin/deployctl history -i my.yaml"]
    assert re.search(r"│ 2\s+│ live", history), history
    assert "env on node1, node2" in history
    assert "rolling back to revision 1" in out[".venv/bin/deployctl rollback -i my.yaml -y"]
    assert "no engine container left" in out[".venv/bin/deployctl down -i my.yaml"]
