#!/usr/bin/python3
"""Stand-in for Ascend's npu-exporter (MindCluster) on a simulated host: `npu_exporter.py --ip IP [--port 8082]`.

Stdlib only. Serves GET /metrics in Prometheus text with the long-standing names of
Ascend/ascend-npu-exporter@0516e8af collector/npu_collector.go (L23-51), one series per visible chip, label `id` =
its physical id: npu_chip_info_health_status (1 when npu-smi says OK, else 0: getHealth counts any non-zero DSMI
health as unhealthy), npu_chip_info_error_code (0, or the first code npu-smi shows for the chip's health, as an
integer), npu_chip_info_hbm_used_memory / npu_chip_info_hbm_total_memory (MB), and machine_npu_nums. Read from the
node state npu-smi reads ($FAKECLUSTER_STATE or /etc/fakecluster/node.json) on every request, so an injected fault
shows on the next scrape. Default port 8082 (cmd/npu-exporter/main.go L49); plain http, as with -enableHTTP.
"""

import argparse
import http.server
import json
import os
import socketserver

STATE_PATH = "/etc/fakecluster/node.json"
# the first error code `npu-smi info -t health` shows per health (npu_smi.py HEALTH_ERRORS)
ERROR_CODES = {"Warning": 0x80E18005, "Alarm": 0xA4025021, "Critical": 0x80CB8009}


def load_state():
    with open(os.environ.get("FAKECLUSTER_STATE", STATE_PATH)) as f:
        return json.load(f)


def metrics_text(st):
    devices = st["devices"]
    out = ["# HELP machine_npu_nums Amount of npu installed on the machine.", "# TYPE machine_npu_nums gauge",
           "machine_npu_nums %d" % len(devices)]
    rows = (("npu_chip_info_health_status", "the npu health status", lambda d: 1 if d["health"] == "OK" else 0),
            ("npu_chip_info_error_code", "the npu error code", lambda d: ERROR_CODES.get(d["health"], 0)),
            ("npu_chip_info_hbm_used_memory", "the npu hbm used memory", lambda d: d["hbm_used"]),
            ("npu_chip_info_hbm_total_memory", "the npu hbm total memory", lambda d: st["hbm_total_mb"]))
    for name, doc, value in rows:
        out += ["# HELP %s %s" % (name, doc), "# TYPE %s gauge" % name]
        out += ['%s{id="%d"} %d' % (name, d["phy"], value(d)) for d in devices]
    return "\n".join(out) + "\n"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        if self.path.split("?")[0] != "/metrics":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = metrics_text(load_state()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    p = argparse.ArgumentParser(prog="npu-exporter")
    p.add_argument("--ip", required=True)
    p.add_argument("--port", type=int, default=8082)
    a = p.parse_args()
    Server((a.ip, a.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
