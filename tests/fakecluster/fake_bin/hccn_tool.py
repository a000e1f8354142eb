#!/usr/bin/python3
"""Fake `hccn_tool` (installed as /usr/local/Ascend/driver/tools/hccn_tool).

Stdlib only. Output strings and exit codes follow the 910B hccn_tool sources (hicann/driver
src/custom/network/hccn/...: tool_ops*.c, tool_tls.c, cmd.c, ossl_user_linux.h) and the real
outputs in shared/reference/ascend/hccn/:

  -i N -ip -g            ipaddr:X / netmask:Y            (none: stderr "Get ipconf failed, because no ip
                                                           was preset there!", exit 13 = 0x400d & 0xff)
  -i N -ip -s address X netmask Y                        (updates /etc/hccn.conf address_N/netmask_N)
  -i N -link -g          link status: UP|DOWN
  -i N -net_health -g    net health status: Success|Socket fail|...
  -i N -netdetect -g     netdetect address: X
  -i N -gateway -g       default gateway:X, Iface:ethN
  -i N -tls -g           dev_id:N, tls switch[0|1](0:disable, 1:enable), ... + cert blocks
  -i N -tls -s enable 0|1
  -i N -vnic -g          (A3) vnic link status / vnic ipaddr / vnic netmask
  -i N -ping -g address X [pkt N]      success only if X is a device IP of a fake node whose link is up
  -i N -hccs_ping -g address X         (A3) same over the vNIC IPs
  -i N -lldp -g, -link_stat -g, -fec -g
Errors: unknown major cmd -> "Get invalid major cmd." (exit 3); bad/missing device -> "Get invalid
device id." (exit 4); bad sub-option -> "Get unknown option!" + parameter list (exit 3).
"""

import json
import os
import sys
import time

STATE_PATH = "/etc/fakecluster/node.json"
HCCN_CONF = "/etc/hccn.conf"

# exit status = (UDA error code) & 0xff
RC_MAJOR_TYPE = 0x1001 & 0xFF
RC_MAJOR_NUM = 0x1002 & 0xFF
RC_MAJOR_INVALID = 0x1003 & 0xFF
RC_DEV_ID = 0x1004 & 0xFF
RC_PARAM_INVALID = 0x2001 & 0xFF
RC_PARAM_UNKNOWN_OPT = 0x2003 & 0xFF
RC_PARAM_COUNT = 0x2004 & 0xFF
RC_DSMI_EXE = 0x4001 & 0xFF
RC_GATEWAY_NOT_PRESET = 0x4002 & 0xFF
RC_IPCONF_NOT_PRESET = 0x400D & 0xFF
RC_LINK_DOWN = 0x4016 & 0xFF
RC_UNSUPPORTED_PRODUCT = 0x300D & 0xFF

HELP = {
    "-ip": ("ip cfg cmd",
            "   [-s]                 : set ip cfg \n"
            "       address %s       : set IPv4 ip address, such as x.x.x.x\n"
            "       netmask %s       : set IPv4 ip netmask, such as x.x.x.x\n"
            "   [-g]                 : get ip address and netmask/prefix_length \n"),
    "-gateway": ("gateway cfg cmd",
                 "   [-s]                : set gateway cfg \n"
                 "       gateway %s      : set IPv4 gateway, such as x.x.x.x\n"
                 "   [-g]                : get gateway address \n"),
    "-netdetect": ("net detect cfg cmd",
                   "   [-s]                : set net detect cfg \n"
                   "       address %s      : set net detect IPv4 ip address, such as x.x.x.x\n"
                   "   [-g]                : get net detect cfg \n"),
    "-lldp": ("lldp cfg cmd", "   [-g]        : get lldp cfg \n"),
    "-link": ("link related cmd",
              "   [-s]                   : set the eth ports link status\n"
              "       down               : shut down eth port \n"
              "       up                 : start up eth port \n"
              "   [-g]                   : get the eth ports link status, UP or DOWN \n"),
    "-net_health": ("net health cmd", "   [-g]        : get net health status\n"),
    "-tls": ("tls cfg cmd",
             "   [-s]        : set tls cfg\n"
             "       enable %d : set tls enable, 0: disable, 1: enable\n"
             "       host      : if you want to set tls enable on host, you need to add host flag on the tail\n"
             "   [-g]        : get tls cfg\n"
             "       host      : if you want to get tls certificate suite on host, you need to add host flag "
             "on the tail\n"),
    "-vnic": ("vnic cmd", "   [-g]        : get vnic link status, ip address and netmask \n"),
    "-ping": ("ping cmd",
              "   [-g]        : get ping result\n"
              "       address %s : destination ip address, such as x.x.x.x\n"
              "       [pkt %d]   : packet number, [1 ~ 1000], default 3\n"),
    "-hccs_ping": ("hccs ping cmd",
                   "   [-g]        : get hccs ping result\n"
                   "       address %s : destination ip address, such as x.x.x.x\n"
                   "       [pkt %d]   : packet number, [1 ~ 1000], default 3\n"),
    "-link_stat": ("link history statistics cmd",
                   "   [-g]        : get link history statistics\n"
                   "   [-c]        : clear link history statistics\n"),
    "-fec": ("fec cmd", "   [-g]        : get fec mode\n"),
}
# real major commands this fake does not simulate
OTHER_MAJORS = {"-mac", "-cfg", "-dscp_to_tc", "-shaping", "-mtu", "-arp", "-route", "-pci", "-context", "-reg",
                "-optical", "-stat", "-version", "-process", "-udp", "-bandwidth", "-status", "-generic",
                "-eth_test", "-hw_stats", "-udhcpc", "-dcqcn", "-local_lldp", "-speed", "-duplex", "-scdr"}

CERTS = [
    ("pub cert", "/C=CN/O=Huawei/CN=Huawei Equipment CA", "Jan 19 06:54:57 2023", "Jan 19 06:54:57 2043"),
    ("ca1 cert", "/C=CN/O=Huawei/CN=Huawei Equipment Root CA", "Oct 16 03:15:09 2016", "Oct 16 03:15:09 2041"),
]


class Fail(Exception):
    def __init__(self, rc, err="", out=""):
        super().__init__(err or out)
        self.rc, self.err, self.out = rc, err, out


def load_state(path=None):
    with open(path or os.environ.get("FAKECLUSTER_STATE", STATE_PATH)) as f:
        return json.load(f)


def save_state(st, path=None):
    path = path or os.environ.get("FAKECLUSTER_STATE", STATE_PATH)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(st, f, indent=1)
    os.replace(tmp, path)


def param_list(major):
    desc, body = HELP[major]
    return "[ hccn_tool -i devid %s ] needs the following parameters:\n%s\n" % (major, body)


def unknown_option(major):
    return Fail(RC_PARAM_UNKNOWN_OPT, err="Get unknown option!\n", out=param_list(major))


def count_error(major):
    return Fail(RC_PARAM_COUNT, err="The total count of input parameters is wrong!\n", out=param_list(major))


def help_text():
    lines = []
    for major, (desc, body) in HELP.items():
        lines.append("hccn_tool -i devid %s" % major)
        lines.append(body)
    return "\n".join(lines) + "\n"


def device(st, phy):
    for d in st["devices"]:
        if d["phy"] == phy:
            return d
    return None


def kv_args(args, major):
    """['address', 'x', 'netmask', 'y'] -> dict; odd count -> parameter count error."""
    if len(args) % 2:
        raise count_error(major)
    return dict(zip(args[0::2], args[1::2]))


def peers(st):
    """State of every node of the cluster (read live from the other nodes' state files on the host)."""
    path = st.get("cluster_state")
    if not path or not os.path.exists(path):
        return [st]
    with open(path) as f:
        nodes = json.load(f).get("nodes", {})
    out = []
    for name, state_file in nodes.items():
        if name == st["name"]:
            out.append(st)
            continue
        try:
            with open(state_file) as f:
                out.append(json.load(f))
        except (OSError, ValueError):
            continue
    return out


def answers(st, addr, key):
    """Does some fake device with IP `addr` (key "ip" or "vnic_ip") answer a ping?"""
    for peer in peers(st):
        if not peer.get("reachable", True):
            continue
        for d in peer["devices"]:
            if d.get(key) == addr and d["link"] == "UP":
                return True
    return False


def ping(st, d, args, major, table):
    if not args or args[0] != "-g":
        raise unknown_option(major)
    opts = kv_args(args[1:], major)
    if "address" not in opts:
        raise count_error(major)
    addr = opts["address"]
    count = int(opts.get("pkt", 3))
    key = "ip" if table == "device_ips" else "vnic_ip"
    own = d.get(key)
    if not own:
        raise Fail(RC_IPCONF_NOT_PRESET, err="Get ipconf failed, because no ip was preset there!\n")
    if d["link"] != "UP":
        raise Fail(RC_LINK_DOWN, err="Execute failed: Link status is down.\n")
    ok = answers(st, addr, key)
    out = ["device %d PING %s" % (d["phy"], addr)]
    if ok:
        for seq in range(count):
            out.append("recv seq=%d,time=%.6fms" % (seq, 0.114 if seq == 0 else 0.063 + 0.001 * (seq % 3)))
        out.append("%d packets transmitted, %d received, 0.00%% packet loss" % (count, count))
    else:
        out.append("%d packets transmitted, 0 received, 100.00%% packet loss" % count)
    return "\n".join(out) + "\n"


def update_hccn_conf(phy, values, conf_path):
    try:
        with open(conf_path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    for key, val in values.items():
        name = "%s_%d" % (key, phy)
        for i, line in enumerate(lines):
            if line.split("=", 1)[0].strip() == name:
                lines[i] = "%s=%s" % (name, val)
                break
        else:
            lines.append("%s=%s" % (name, val))
    with open(conf_path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run(argv, st, state_path=None, conf_path=HCCN_CONF):
    """argv without the program name -> (rc, stdout, stderr)."""
    try:
        return 0, dispatch(argv, st, state_path, conf_path), ""
    except Fail as e:
        return e.rc, e.out, e.err


def dispatch(argv, st, state_path, conf_path):
    if len(argv) == 1 and argv[0] in ("-h", "--help"):
        return help_text()
    if len(argv) < 2:
        raise Fail(RC_MAJOR_NUM, err="Get invalid major cmd number. Please check your input.\n"
                                     "Enter [ hccn_tool -h ] for more details.\n")
    if argv[0] != "-i":
        raise Fail(RC_MAJOR_TYPE, err="Get invalid major cmd type. The valid major cmd type should be \"-a\" "
                                      "or \"-i\".\nEnter [ hccn_tool -h ] for more details.\n")
    if len(argv) < 3 or (argv[2] not in HELP and argv[2] not in OTHER_MAJORS):
        raise Fail(RC_MAJOR_INVALID, err="Get invalid major cmd.\nEnter [ hccn_tool -h ] for more details.\n")
    devid, major, args = argv[1], argv[2], argv[3:]
    if not devid.isdigit() or len(devid) > 2 or device(st, int(devid)) is None:
        raise Fail(RC_DEV_ID, err="Get invalid device id.\n")
    d = device(st, int(devid))
    a3 = st["hardware"] == "a3"
    if major in OTHER_MAJORS:
        raise Fail(RC_UNSUPPORTED_PRODUCT, out="The command is not supported on this product.\n")
    if major in ("-vnic", "-hccs_ping") and not a3:
        raise Fail(RC_UNSUPPORTED_PRODUCT, out="The command is not supported on this product.\n")
    if major in ("-ping", "-hccs_ping"):
        return ping(st, d, args, major, "device_ips" if major == "-ping" else "vnic_ips")
    sub = args[0] if args else None
    if sub == "-g":
        rest = args[1:]
        if major == "-tls" and rest == ["host"]:
            rest = []
        if rest:
            raise count_error(major)
        return get(st, d, major)
    if sub == "-s" and major in ("-ip", "-tls", "-link"):
        return set_(st, d, major, args[1:], state_path, conf_path)
    if sub == "-c" and major == "-link_stat":
        return "Cmd executed successfully!\n"
    raise unknown_option(major)


def get(st, d, major):
    if major == "-ip":
        if not d.get("ip"):
            raise Fail(RC_IPCONF_NOT_PRESET, err="Get ipconf failed, because no ip was preset there!\n")
        return "ipaddr:%s\nnetmask:%s\n" % (d["ip"], d["netmask"])
    if major == "-link":
        return "link status: %s\n" % d["link"]
    if major == "-net_health":
        return "net health status: %s\n" % d["net_health"]
    if major == "-netdetect":
        if not d.get("netdetect"):
            raise Fail(RC_DSMI_EXE, err="Command execute failed!\n")
        return "netdetect address: %s\n" % d["netdetect"]
    if major == "-gateway":
        if not d.get("gateway"):
            raise Fail(RC_GATEWAY_NOT_PRESET, err="Get gateway failed, because no gateway was preset there!\n")
        return "default gateway:%s, Iface:eth%d\n" % (d["gateway"], d["phy"])
    if major == "-tls":
        out = ["dev_id:%d, tls switch[%d](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
               "tls alarm time threshold[60]days" % (d["phy"], d["tls"])]
        for kind, issuer, start, end in CERTS:
            out += ["dev_id:%d, [%s] info:" % (d["phy"], kind), "\t issuer[%s]" % issuer,
                    "\t start_time[%s GMT]" % start, "\t end_time[%s GMT]" % end,
                    "\t tls expiration status[0](0:normal, 1:near expiration, 2:has expired)"]
        return "\n".join(out) + "\n"
    if major == "-vnic":
        return "vnic link status: %s\nvnic ipaddr: %s\nvnic netmask: %s\n" % (
            "UP", d.get("vnic_ip") or "0.0.0.0", d.get("vnic_netmask") or "0.0.0.0")
    if major == "-lldp":
        return ("Chassis ID TLV\n\tMAC: %s\nPort ID TLV\n\tIfname: %s\nTime To Live TLV\n\t121\n"
                "End Of LLDPDU TLV\n" % (d["peer_mac"], d["peer_port"]))
    if major == "-link_stat":
        p = "[devid %d]" % d["phy"]
        out = [p + "current time        : " + time.strftime("%a %b %d %H:%M:%S %Y"),
               p + "link up count       : %d" % (1 if d["link"] == "UP" else 0),
               p + "link change records :"]
        if d["link"] == "UP":
            out.append(p + "    " + st["boot_time"] + "    LINK UP")
        else:
            out += [p + "    " + st["boot_time"] + "    LINK DOWN"]
        return "\n".join(out) + "\n"
    if major == "-fec":
        return "fec mode: rs FEC mode\n"
    raise unknown_option(major)


def set_(st, d, major, args, state_path, conf_path):
    if major == "-tls":
        opts = kv_args(args[:-1] if args and args[-1] == "host" else args, major)
        if set(opts) != {"enable"} or opts["enable"] not in ("0", "1"):
            raise Fail(RC_PARAM_INVALID, err="Get invalid enable value!\n", out=param_list(major))
        d["tls"] = int(opts["enable"])
        save_state(st, state_path)
        return "Cmd executed successfully!\n"
    if major == "-link":
        if args not in (["up"], ["down"]):
            raise unknown_option(major)
        d["link"] = args[0].upper()
        save_state(st, state_path)
        return "Cmd executed successfully!\n"
    opts = kv_args(args, major)   # -ip -s address X netmask Y
    if set(opts) != {"address", "netmask"}:
        raise count_error(major)
    d["ip"], d["netmask"] = opts["address"], opts["netmask"]
    save_state(st, state_path)
    update_hccn_conf(d["phy"], {"address": opts["address"], "netmask": opts["netmask"]}, conf_path)
    return "Cmd executed successfully!\n"


def main():
    st = load_state()
    if st.get("slow"):
        time.sleep(float(st["slow"]))
    rc, out, err = run(sys.argv[1:], st)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    sys.exit(main())
