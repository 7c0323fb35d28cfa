#!/usr/bin/env python3
"""The wire part of the MetalLB speaker simulator (Node has no packet sockets).

  wire.py speaker IFACE   ARP responder like MetalLB's (mdlayher/arp over AF_PACKET): answers
                          requests for every VIP in its set (all the services this node owns),
                          unicast, sender IP = VIP. Commands on stdin, one per line:
                          "vips A B ..." (replace the set),  "garp A B ..." (takeover: gratuitous ARP
                          as request and reply, once, then every 1.1 s for 5 s),  "quit". Addresses
                          that are not IPv4 are ignored (no NDP here). Exits when stdin closes (its
                          parent died).
  wire.py send-garp IFACE VIP / send-na IFACE TARGET6
                          One gratuitous ARP (request and reply) / one unsolicited NA, then exit.
  wire.py probe IFACE SRC_IP VIP INTERVAL_MS
                          Sends an ARP request for VIP every INTERVAL_MS and prints one JSON line per
                          round: {"t": send time (epoch ms), "macs": [MACs that answered this round]}.
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
BROADCAST = b"\xff" * 6
ZERO = b"\x00" * 6


def is_ipv4(text):
    try:
        socket.inet_aton(text)
        return text.count(".") == 3
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


def speaker(iface):
    mac = own_mac(iface)
    s = open_socket(iface)
    vips = set()
    garps = []  # [vip, next_send_monotonic, last_allowed_monotonic]
    stdin = sys.stdin.buffer
    buf = b""

    def send_garp(vip):
        # MetalLB sends both forms; some clients only honour one of them.
        send(s, arp_frame(BROADCAST, mac, 1, mac, vip, ZERO, vip))
        send(s, arp_frame(BROADCAST, mac, 2, mac, vip, BROADCAST, vip))

    while True:
        now = time.monotonic()
        timeout = min([g[1] - now for g in garps] + [0.5])
        r, _, _ = select.select([s, stdin], [], [], max(timeout, 0))
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
                    vips = {v for v in parts[1:] if is_ipv4(v)}
                    garps = [g for g in garps if g[0] in vips]
                elif parts[0] == "garp":
                    for vip in [v for v in parts[1:] if is_ipv4(v)]:
                        send_garp(vip)
                        t = time.monotonic()
                        garps = [g for g in garps if g[0] != vip] + [[vip, t + 1.1, t + 5.0]]
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


def probe(iface, src_ip, vip, interval_ms):
    mac = own_mac(iface)
    s = open_socket(iface)
    interval = interval_ms / 1000.0
    out = sys.stdout
    while True:
        t_send = time.time()
        deadline = time.monotonic() + interval
        send(s, arp_frame(BROADCAST, mac, 1, mac, src_ip, ZERO, vip))
        macs = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r, _, _ = select.select([s], [], [], left)
            if not r:
                continue
            while True:
                try:
                    frame = s.recv(2048)
                except BlockingIOError:
                    break
                a = parse_arp(frame)
                if a and a["op"] == 2 and a["spa"] == vip and a["tpa"] == src_ip:
                    m = mac_text(a["sha"])
                    if m not in macs:
                        macs.append(m)
        out.write(json.dumps({"t": round(t_send * 1000), "macs": macs}) + "\n")
        out.flush()


def send_garp(iface, vip):
    """One gratuitous ARP, as request and as reply (what a takeover sends)."""
    mac = own_mac(iface)
    s = open_socket(iface)
    send(s, arp_frame(BROADCAST, mac, 1, mac, vip, ZERO, vip))
    send(s, arp_frame(BROADCAST, mac, 2, mac, vip, BROADCAST, vip))


def send_na(iface, target):
    """One unsolicited neighbour advertisement for target, from a raw ICMPv6 socket like MetalLB's."""
    mac = own_mac(iface)
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, iface.encode())
    # type 136, code 0, checksum (kernel fills it for raw ICMPv6), flags: override
    body = struct.pack("!BBHI", 136, 0, 0, 0x20000000) + socket.inet_pton(socket.AF_INET6, target)
    body += struct.pack("!BB", 2, 1) + mac  # target link-layer address option
    idx = socket.if_nametoindex(iface)
    try:
        s.sendto(body, ("ff02::1", 0, 0, idx))
    except PermissionError:
        pass  # dropped by an nft output rule (the fence)


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
