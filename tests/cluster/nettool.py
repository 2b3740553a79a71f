#!/usr/bin/env python3
"""Small network checks for the emulated cluster; standard library only.

  nettool.py ping [-W SEC] HOST...        ICMP echo to each host (raw socket: root);
                                          exit 1 if any host does not answer
  nettool.py server [--port P] [--flows N] [--bind ADDR]
                                          accept N flows, count what each sends,
                                          send each client its receiver-side rate
                                          (gives up after --wait s without a flow)
  nettool.py client HOST [--port P] [--seconds S] [--skip S]
                                          send for S seconds, print the rate the
                                          receiver measured
The client prints one line: "<host>:<port> <Mbit/s> Mbit/s (<bytes> bytes in
<seconds> s, receiver-side)". The rate is taken over the middle of the flow:
the first and last --skip seconds (TCP slow start, the token bucket's initial
burst, the other flow of a pair starting or ending first) are left out.
"""

import argparse
import bisect
import json
import os
import socket
import struct
import sys
import threading
import time

DEFAULT_PORT = 5201
CHUNK = 1 << 20


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ping_one(host, timeout):
    """Returns the round trip in ms, or None if no reply came in time."""
    addr = socket.gethostbyname(host)
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        raw = True
    except PermissionError:
        # Unprivileged ICMP sockets, where net.ipv4.ping_group_range allows them.
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
        raw = False
    with sock:
        ident = os.getpid() & 0xFFFF
        seq = 1
        payload = b"hoccl-cluster-ping"
        header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        packet = struct.pack("!BBHHH", 8, 0, checksum(header + payload), ident, seq) + payload
        start = time.monotonic()
        sock.sendto(packet, (addr, 0))
        deadline = start + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            sock.settimeout(left)
            try:
                data, src = sock.recvfrom(2048)
            except socket.timeout:
                return None
            if src[0] != addr:
                continue
            icmp = data[(data[0] & 0x0F) * 4:] if raw else data
            kind, _, _, rid, rseq = struct.unpack("!BBHHH", icmp[:8])
            # A datagram ICMP socket rewrites the identifier; it only gets its own replies.
            if kind == 0 and rseq == seq and (rid == ident or not raw):
                return (time.monotonic() - start) * 1e3


def cmd_ping(args):
    failed = 0
    for host in args.hosts:
        rtt = ping_one(host, args.W)
        if rtt is None:
            failed += 1
            print("%s FAIL (no reply in %.1f s)" % (host, args.W))
        else:
            print("%s ok %.3f ms" % (host, rtt))
    return 1 if failed else 0


def window_rate(samples, skip):
    """Bytes/s between first+skip and last-skip; the whole flow if that is too short."""
    times = [t for t, _ in samples]
    t0, t1 = times[0], times[-1]
    if t1 - t0 > 4 * skip and skip > 0:
        a, b = t0 + skip, t1 - skip
    else:
        a, b = t0, t1

    def bytes_at(t):
        i = bisect.bisect_right(times, t) - 1
        return samples[max(i, 0)][1]

    span = b - a
    return (bytes_at(b) - bytes_at(a)) / span if span > 0 else 0.0, samples[-1][1], t1 - t0


def serve_flow(conn, peer, lock, results):
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hello = b""
        while len(hello) < 64:  # the client's settings, padded: "skip=<seconds>\n"
            part = conn.recv(64 - len(hello))
            if not part:
                return
            hello += part
        skip = float(hello.decode().strip().split("=", 1)[1]) if hello.startswith(b"skip=") else 0.0
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        total = 0
        samples = []
        while True:
            n = conn.recv_into(view)
            if n == 0:
                break
            total += n
            samples.append((time.monotonic(), total))
        if not samples:
            return
        rate, nbytes, secs = window_rate(samples, skip)
        report = {"mbps": rate * 8 / 1e6, "bytes": nbytes, "seconds": secs}
        conn.sendall((json.dumps(report) + "\n").encode())
        with lock:
            results.append((peer, report))


def cmd_server(args):
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((args.bind, args.port))
    lsock.listen(args.flows)
    lsock.settimeout(args.wait)
    lock = threading.Lock()
    results = []
    threads = []
    for _ in range(args.flows):
        try:
            conn, peer = lsock.accept()
        except socket.timeout:
            print("no flow arrived in %g s" % args.wait, file=sys.stderr)
            return 1
        conn.settimeout(None)
        t = threading.Thread(target=serve_flow, args=(conn, peer[0], lock, results))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    lsock.close()
    for peer, r in results:
        print("from %s %.1f Mbit/s (%d bytes in %.2f s, receiver-side)" % (peer, r["mbps"], r["bytes"], r["seconds"]))
    return 0


def connect_retry(host, port, patience):
    deadline = time.monotonic() + patience
    while True:
        try:
            return socket.create_connection((host, port), timeout=patience)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def cmd_client(args):
    sock = connect_retry(args.host, args.port, 10.0)
    with sock:
        sock.settimeout(args.seconds + 30)
        sock.sendall(("skip=%g\n" % args.skip).encode().ljust(64))
        block = b"\0" * CHUNK
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            sock.sendall(block)
        sock.shutdown(socket.SHUT_WR)
        reply = b""
        while not reply.endswith(b"\n"):
            part = sock.recv(4096)
            if not part:
                break
            reply += part
    if not reply:
        print("%s:%d no report from the receiver" % (args.host, args.port))
        return 1
    r = json.loads(reply)
    print("%s:%d %.1f Mbit/s (%d bytes in %.2f s, receiver-side)" % (args.host, args.port, r["mbps"], r["bytes"], r["seconds"]))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("ping")
    sp.add_argument("-W", type=float, default=1.0, help="seconds to wait for each reply")
    sp.add_argument("hosts", nargs="+")
    ss = sub.add_parser("server")
    ss.add_argument("--port", type=int, default=DEFAULT_PORT)
    ss.add_argument("--flows", type=int, default=1)
    ss.add_argument("--bind", default="0.0.0.0")
    ss.add_argument("--wait", type=float, default=30.0, help="give up if no flow arrives for this many seconds")
    sc = sub.add_parser("client")
    sc.add_argument("host")
    sc.add_argument("--port", type=int, default=DEFAULT_PORT)
    sc.add_argument("--seconds", type=float, default=2.0)
    sc.add_argument("--skip", type=float, default=0.25)
    args = p.parse_args()
    return {"ping": cmd_ping, "server": cmd_server, "client": cmd_client}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
