#!/usr/bin/env python3
"""The wire part of the MetalLB speaker simulator (Node has no packet sockets).

  wire.py speaker IFACE   ARP and NDP responder like MetalLB's: for every VIP in its set (all the
                          services this node owns) it answers ARP requests (mdlayher/arp over
                          AF_PACKET: unicast, sender IP = VIP) and neighbour solicitations
                          (internal/layer2/ndp.go over mdlayher/ndp: a raw ICMPv6 socket on the
                          link-local address, joined to each VIP's solicited-node group; an NS
                          without a source link-layer option is ignored; the answer is a solicited
                          NA, override off, with the target link-layer option, sent to the
                          solicitor). Commands on stdin, one per line: "vips A B ..." (replace the
                          set, either family),  "garp A B ..." (takeover: gratuitous ARP as request
                          and reply for IPv4, an unsolicited NA to ff02::1 with override on for
                          IPv6; once, then every 1.1 s for 5 s),  "quit". Each "vips" is
                          acknowledged with a line "applied" on stdout once the set answers, so
                          the simulator writes a ServiceL2Status only for VIPs answered already,
                          as MetalLB's in-process responder does. Exits when stdin closes (its
                          parent died).
  wire.py send-garp IFACE VIP / send-na IFACE TARGET6
                          One gratuitous ARP (request and reply) / one unsolicited NA, then exit.
  wire.py probe IFACE SRC_IP VIP INTERVAL_MS
                          Sends an ARP request (IPv4 VIP; from hosts .224-.239 of SRC_IP's /24 in
                          turn, so that each answer names its round) or a neighbour solicitation
                          to the VIP's solicited-node group with a source link-layer option (IPv6
                          VIP; SRC_IP is then the client's IPv6 address) every INTERVAL_MS, over
                          AF_PACKET, and prints one JSON line per round once its answers are in
                          (IPv4: 500 ms, IPv6: INTERVAL_MS): {"t": send time (epoch ms), "macs":
                          [MACs that answered this round]} (ARP: the reply's sender MAC; NDP: a
                          solicited NA's target link-layer option, else its Ethernet source).
Standard library only.
"""
import json
import os
import select
import socket
import struct
import sys
import time

ETH_P_ARP = 0x0806
ETH_P_IPV6 = 0x86DD
ICMPV6 = 58
ND_NS = 135
ND_NA = 136
NA_SOLICITED = 0x40000000
NA_OVERRIDE = 0x20000000
BROADCAST = b"\xff" * 6
ZERO = b"\x00" * 6


def is_ipv4(text):
    try:
        socket.inet_aton(text)
        return text.count(".") == 3
    except OSError:
        return False


def is_ipv6(text):
    try:
        socket.inet_pton(socket.AF_INET6, text)
        return True
    except OSError:
        return False


def own_mac(iface):
    with open(f"/sys/class/net/{iface}/address") as f:
        return bytes.fromhex(f.read().strip().replace(":", ""))


def mac_text(b):
    return ":".join(f"{x:02x}" for x in b)


def arp_frame(dst_mac, src_mac, op, sha, spa, tha, tpa):
    eth = dst_mac + src_mac + struct.pack("!H", ETH_P_ARP)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + sha + socket.inet_aton(spa) + tha + socket.inet_aton(tpa)
    return eth + arp


def parse_arp(frame):
    if len(frame) < 42 or struct.unpack("!H", frame[12:14])[0] != ETH_P_ARP:
        return None
    op = struct.unpack("!H", frame[20:22])[0]
    return {
        "op": op,
        "sha": frame[22:28],
        "spa": socket.inet_ntoa(frame[28:32]),
        "tha": frame[32:38],
        "tpa": socket.inet_ntoa(frame[38:42]),
        "src": frame[6:12],
    }


def send(s, frame):
    # A fence (nft netdev egress drop) makes the send fail with ENOBUFS; the real speaker logs
    # that and carries on, so does this one.
    try:
        s.send(frame)
    except OSError:
        pass


def open_socket(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP))
    s.bind((iface, ETH_P_ARP))
    s.setblocking(False)
    return s


def solicited_node_group(addr):
    """ff02::1:ffXX:XXXX for a packed IPv6 address (RFC 4291 2.7.1)."""
    return socket.inet_pton(socket.AF_INET6, "ff02::1:ff00:0")[:13] + addr[13:]


def na_body(target, mac, flags):
    """A neighbour advertisement with the target link-layer address option (checksum: the kernel's)."""
    return struct.pack("!BBHI", ND_NA, 0, 0, flags) + target + struct.pack("!BB", 2, 1) + mac


def link_local(iface):
    """The link's usable (not tentative) link-local address, as text; None if it has none yet."""
    try:
        with open("/proc/net/if_inet6") as f:
            for line in f:
                addr, _idx, _plen, scope, flags, name = line.split()
                if name == iface and int(scope, 16) == 0x20 and not int(flags, 16) & 0x40:
                    return socket.inet_ntop(socket.AF_INET6, bytes.fromhex(addr))
    except OSError:
        pass
    return None


class NdpResponder:
    """MetalLB's ndpClient: a raw ICMPv6 socket bound to the link-local address (mdlayher/ndp's
    Dial(ifi, LinkLocal)), hop limit 255, joined to the solicited-node group of every VIP it
    watches. Its NAs leave through the IP stack, so an nft output hook sees them (the fence); with
    multicast loopback on, as MetalLB's, an unsolicited NA to ff02::1 is also looped back to input."""

    def __init__(self, iface, mac):
        self.mac = mac
        self.idx = socket.if_nametoindex(iface)
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, iface.encode())
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 255)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, self.idx)
        # IPV6_MULTICAST_LOOP is left on (the kernel's default), as MetalLB leaves it: every NA to
        # ff02::1 comes back through this node's own input hook, where a fence's claim rule must
        # not take it for another node's takeover.
        ll = link_local(iface)
        if ll:
            try:
                s.bind((ll, 0, 0, self.idx))
            except OSError:
                pass  # the kernel picks the source then
        s.setblocking(False)
        self.sock = s
        self.groups = {}  # packed group -> how many VIPs need it (MetalLB's refcount)

    def watch(self, vips):
        """Joins the groups of these VIPs and leaves those no VIP needs any more."""
        want = {}
        for v in vips:
            g = solicited_node_group(socket.inet_pton(socket.AF_INET6, v))
            want[g] = want.get(g, 0) + 1
        for g in set(self.groups) - set(want):
            self._member(socket.IPV6_LEAVE_GROUP, g)
        for g in set(want) - set(self.groups):
            self._member(socket.IPV6_JOIN_GROUP, g)
        self.groups = want

    def _member(self, op, group):
        try:
            self.sock.setsockopt(socket.IPPROTO_IPV6, op, group + struct.pack("@I", self.idx))
        except OSError:
            pass

    def send(self, dst, target, flags):
        try:
            self.sock.sendto(na_body(target, self.mac, flags), (dst, 0, 0, self.idx))
        except OSError:
            pass  # dropped by an nft output rule (the fence): MetalLB logs it and carries on

    def gratuitous(self, vip):
        self.send("ff02::1", socket.inet_pton(socket.AF_INET6, vip), NA_OVERRIDE)

    def answer(self, vips6):
        """Answers every pending NS for a VIP in vips6 (packed) with a solicited NA to its sender."""
        while True:
            try:
                data, addr = self.sock.recvfrom(2048)
            except BlockingIOError:
                return
            if len(data) < 24 or data[0] != ND_NS or data[1] != 0:
                continue
            target = data[8:24]
            if target not in vips6 or not has_option(data[24:], 1):
                continue  # not ours, or no source link-layer address: MetalLB drops it too
            self.send(addr[0], target, NA_SOLICITED)


def has_option(opts, kind):
    """Whether the NDP options carry one of this type (1 source, 2 target link-layer address)."""
    i = 0
    while i + 2 <= len(opts):
        length = opts[i + 1] * 8
        if length == 0:
            return False
        if opts[i] == kind:
            return True
        i += length
    return False


def speaker(iface):
    mac = own_mac(iface)
    s = open_socket(iface)
    ndp = NdpResponder(iface, mac)
    vips = set()
    vips6 = set()  # packed
    garps = []  # [vip, next_send_monotonic, last_allowed_monotonic]
    stdin = sys.stdin.buffer
    buf = b""

    def send_garp(vip):
        if is_ipv6(vip):
            ndp.gratuitous(vip)
            return
        # MetalLB sends both forms; some clients only honour one of them.
        send(s, arp_frame(BROADCAST, mac, 1, mac, vip, ZERO, vip))
        send(s, arp_frame(BROADCAST, mac, 2, mac, vip, BROADCAST, vip))

    def known(v):
        return is_ipv4(v) or is_ipv6(v)

    while True:
        now = time.monotonic()
        timeout = min([g[1] - now for g in garps] + [0.5])
        r, _, _ = select.select([s, ndp.sock, stdin], [], [], max(timeout, 0))
        if stdin in r:
            chunk = os.read(stdin.fileno(), 4096)
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                parts = line.decode().split()
                if not parts:
                    continue
                if parts[0] == "quit":
                    return
                if parts[0] == "vips":
                    vips = {v for v in parts[1:] if known(v)}
                    v6 = [v for v in vips if is_ipv6(v)]
                    vips6 = {socket.inet_pton(socket.AF_INET6, v) for v in v6}
                    ndp.watch(v6)
                    garps = [g for g in garps if g[0] in vips]
                    os.write(1, b"applied\n")
                elif parts[0] == "garp":
                    for vip in [v for v in parts[1:] if known(v)]:
                        send_garp(vip)
                        t = time.monotonic()
                        garps = [g for g in garps if g[0] != vip] + [[vip, t + 1.1, t + 5.0]]
        if ndp.sock in r:
            ndp.answer(vips6)
        if s in r:
            while True:
                try:
                    frame = s.recv(2048)
                except BlockingIOError:
                    break
                a = parse_arp(frame)
                # Any request for an owned VIP is answered, gratuitous ones (sender = target, another
                # speaker's takeover) included, as MetalLB's responder does; never its own frames.
                if not a or a["op"] != 1 or a["src"] == mac or a["tpa"] not in vips:
                    continue
                send(s, arp_frame(a["sha"], mac, 2, mac, a["tpa"], a["sha"], a["spa"]))
        now = time.monotonic()
        for g in list(garps):
            if now >= g[1]:
                if g[0] in vips:
                    send_garp(g[0])
                g[1] += 1.1
            if g[1] > g[2]:
                garps.remove(g)


# An IPv4 probe names each round by its request's sender address, which every ARP responder
# (MetalLB's mdlayher/arp, this simulator's, a kernel's) copies into its reply as the target: a
# reply is counted for the request it answers, even when it comes after later requests went out.
# So a responder or this prober held off the CPU for a few hundred ms (a loaded test machine) is
# not read as a dark round, while a request sent when no node announced the VIP is never answered,
# however long one waits. The sender addresses are hosts .224-.239 of the client's /24 (no bed
# gives them out); a round is answered if an answer comes within ANSWER_WINDOW_MS, stricter than a
# Linux client, which waits 1 s before it asks again.
PROBE_SOURCE_HOSTS = range(224, 240)
ANSWER_WINDOW_MS = 500


def probe(iface, src_ip, vip, interval_ms):
    if is_ipv6(vip):
        return probe_ndp(iface, src_ip, vip, interval_ms)
    mac = own_mac(iface)
    prefix = src_ip.rsplit(".", 1)[0]
    sources = [f"{prefix}.{h}" for h in PROBE_SOURCE_HOSTS]
    # Rounds answered late stay distinguishable: never two rounds of one source inside a window.
    window_ms = min(ANSWER_WINDOW_MS, (len(sources) - 2) * interval_ms)
    requests = [(arp_frame(BROADCAST, mac, 1, mac, src, ZERO, vip), src) for src in sources]

    def answered_by(frame):
        a = parse_arp(frame)
        if a and a["op"] == 2 and a["spa"] == vip and a["tha"] == mac:
            return a["tpa"], a["sha"]
        return None

    probe_rounds(open_socket(iface), requests, interval_ms, window_ms, answered_by)


def probe_rounds(s, requests, interval_ms, window_ms, answered_by):
    """Sends requests[i % len(requests)] as round i, every interval_ms, and prints one JSON line per
    round once window_ms have passed since it went out: its send time and the MACs that answered
    it. answered_by(frame) gives (key, MAC) for an answer to the request whose key is `key`, or
    None; with one request only (key None) an answer is the latest round's, and window_ms must be
    interval_ms."""
    interval = interval_ms / 1000.0
    window = window_ms / 1000.0
    out = sys.stdout
    pending = []  # [key, t_send (epoch s), closes (monotonic), macs], oldest first
    i = 0
    next_send = time.monotonic()

    def receive():
        while True:
            try:
                frame = s.recv(2048)
            except BlockingIOError:
                return
            hit = answered_by(frame)
            if hit is None:
                continue
            key, m = hit
            for r in reversed(pending):
                if r[0] == key:
                    if mac_text(m) not in r[3]:
                        r[3].append(mac_text(m))
                    break

    while True:
        now = time.monotonic()
        if now >= next_send:
            frame, key = requests[i % len(requests)]
            i += 1
            pending.append([key, time.time(), now + window, []])
            send(s, frame)
            # Held off the CPU: the next round goes out an interval from now, none are made up.
            next_send = max(next_send + interval, now + interval / 2)
        receive()
        now = time.monotonic()
        while pending and pending[0][2] <= now:
            key, t_send, _, macs = pending.pop(0)
            out.write(json.dumps({"t": round(t_send * 1000), "macs": macs}) + "\n")
        out.flush()
        wake = min([next_send] + [r[2] for r in pending[:1]])
        left = wake - time.monotonic()
        if left > 0:
            select.select([s], [], [], left)


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ns_frame(mac, src, target):
    """A neighbour solicitation for target from src (packed), to its solicited-node group, with
    the source link-layer address option, as a host resolving the VIP sends it."""
    dst = solicited_node_group(target)
    icmp = struct.pack("!BBHI", ND_NS, 0, 0, 0) + target + struct.pack("!BB", 1, 1) + mac
    pseudo = src + dst + struct.pack("!I", len(icmp)) + b"\0\0\0" + bytes([ICMPV6])
    icmp = icmp[:2] + struct.pack("!H", checksum(pseudo + icmp)) + icmp[4:]
    ip6 = struct.pack("!IHBB", 0x60000000, len(icmp), ICMPV6, 255) + src + dst
    eth = b"\x33\x33" + dst[12:] + mac + struct.pack("!H", ETH_P_IPV6)
    return eth + ip6 + icmp


def parse_na(frame):
    """A neighbour advertisement in an Ethernet frame (no extension headers): its IPv6
    destination, flags, target and the MAC it names (target link-layer option, else the source)."""
    if len(frame) < 14 + 40 + 24 or struct.unpack("!H", frame[12:14])[0] != ETH_P_IPV6:
        return None
    ip6 = frame[14:54]
    if ip6[6] != ICMPV6:
        return None
    icmp = frame[54:]
    if icmp[0] != ND_NA:
        return None
    mac = frame[6:12]
    opts = icmp[24:]
    i = 0
    while i + 8 <= len(opts) and opts[i + 1] > 0:
        if opts[i] == 2:
            mac = opts[i + 2:i + 8]
            break
        i += opts[i + 1] * 8
    return {
        "dst": ip6[24:40],
        "flags": struct.unpack("!I", icmp[4:8])[0],
        "target": icmp[8:24],
        "mac": mac,
    }


def probe_ndp(iface, src_ip, vip, interval_ms):
    mac = own_mac(iface)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
    s.bind((iface, ETH_P_IPV6))
    s.setblocking(False)
    src = socket.inet_pton(socket.AF_INET6, src_ip)
    target = socket.inet_pton(socket.AF_INET6, vip)

    def answered_by(frame):
        # Answers to this probe only: solicited, to the probe's address (a takeover's unsolicited
        # NA goes to ff02::1 with the solicited flag off).
        na = parse_na(frame)
        if na and na["target"] == target and na["dst"] == src and na["flags"] & NA_SOLICITED:
            return None, na["mac"]
        return None

    # One source only (an NA goes to the solicitor's address, which must be the client's own).
    probe_rounds(s, [(ns_frame(mac, src, target), None)], interval_ms, interval_ms, answered_by)


def send_garp(iface, vip):
    """One gratuitous ARP, as request and as reply (what a takeover sends)."""
    mac = own_mac(iface)
    s = open_socket(iface)
    send(s, arp_frame(BROADCAST, mac, 1, mac, vip, ZERO, vip))
    send(s, arp_frame(BROADCAST, mac, 2, mac, vip, BROADCAST, vip))


def send_na(iface, target):
    """One unsolicited neighbour advertisement for target, as the speaker's takeover sends it."""
    NdpResponder(iface, own_mac(iface)).gratuitous(target)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "send-garp":
        send_garp(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "send-na":
        send_na(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == "speaker":
        speaker(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] == "probe":
        probe(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BrokenPipeError):
        pass
