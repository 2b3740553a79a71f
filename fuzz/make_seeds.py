#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_bootstrap_wire (valid frames of every kind
and a few nearly valid ones, laid out as src/bootstrap/wire.h declares them)
and of fuzz_ipc_buffer (exported device-buffer messages, transport/p2p/ipc_wire.h);
the fuzzers static_assert the sizes used here.
    fuzz/make_seeds.py            # rewrites fuzz/corpus/{bootstrap_wire,ipc_buffer}/"""
import os
import socket
import struct

MAGIC = 0x1234567890ABCDEF
TAG_HELLO, TAG_TABLE, TAG_ERROR, TAG_PEER, TAG_ABORT = 1, 2, 3, 4, 5


def frame(tag, payload, magic=MAGIC):
    return struct.pack("<QII", magic, tag, len(payload)) + payload


def sockaddr_in(ip, port):  # 28 bytes: the union holds a sockaddr_in6
    raw = struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(ip)
    return raw.ljust(28, b"\0")


def rank_info(host, machine, pid, ip, port, heartbeat_port=0):
    return host.encode().ljust(128, b"\0") + machine.encode().ljust(64, b"\0") + struct.pack("<i", pid) + \
        sockaddr_in(ip, port) + struct.pack("<i", heartbeat_port)


def hello(rank, nranks, fingerprint="HOCCL_SLOTS=8\nHOCCL_SLICE_BYTES=131072\n", protocol=3):
    return struct.pack("<Iiii", protocol, rank, nranks, 100) + \
        rank_info("node%d" % rank, "boot-id", 1000 + rank, "10.0.0.%d" % (rank + 1), 40000 + rank, 41000 + rank) + \
        fingerprint.encode().ljust(512, b"\0") + struct.pack("<i", 300000)


def abort(rank, code, msg):
    return struct.pack("<ii", rank, code) + msg.encode().ljust(1024, b"\0")


NODE = b'{"version":1,"nodes":[{"host_id":"n0","hostname":"n0","cores":4,"nics":[{"name":"eth0","kind":"ethernet","speed_gbps":10}]}]}'

seeds = {
    "hello": frame(TAG_HELLO, hello(0, 4)),
    "hello_bad_protocol": frame(TAG_HELLO, hello(1, 4, protocol=7)),
    "hello_rank_out_of_range": frame(TAG_HELLO, hello(5, 4)),
    "table": frame(TAG_TABLE, b"".join(rank_info("n%d" % r, "b", 10 + r, "10.0.0.1", 5000 + r) for r in range(3))),
    "error": frame(TAG_ERROR, b"rank 2 was started with nranks=3"),
    "peer_hello": frame(TAG_PEER, struct.pack("<i", 3)),
    "abort": frame(TAG_ABORT, abort(2, 6, "rank 2: peer rank 3 has exited")),
    "node_record": frame(9, NODE),
    "stream": frame(TAG_PEER, struct.pack("<i", 1)) + frame(0x10000000, b"\1\2\3\4") +
              frame(TAG_ABORT, abort(1, 8, "rank 1: timeout")),
    "oversized_len": struct.pack("<QII", MAGIC, TAG_TABLE, 0xFFFFFFF0) + b"x" * 32,
}



def write_corpus(target, seeds):
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", target)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(seeds), out))


write_corpus("bootstrap_wire", seeds)


def ipc_buffer(nranks=4, handle_type=1, size=6 << 20, gran=2 << 20, conn=(0, 256), slots=(4096, 4 << 20),
               edge=(1, 0, 0), pid=4242, host=b"node0", handle=b""):
    """First byte: nranks - 1 (the fuzzer's communicator size); then the message."""
    return bytes([nranks - 1]) + struct.pack("<IHHQQQQQQiiii64s64s", 0x43504948, 1, handle_type, size, gran,
                                             conn[0], conn[1], slots[0], slots[1], edge[0], edge[1], edge[2],
                                             pid, host, handle)


ipc_seeds = {
    "posix_fd": ipc_buffer(),
    "fabric": ipc_buffer(handle_type=2, handle=b"\x07" * 64),
    "legacy": ipc_buffer(handle_type=3, handle=b"\x01" + b"\0" * 63, edge=(0, 3, 1)),
    "overlap": ipc_buffer(slots=(128, 4096)),
    "beyond": ipc_buffer(slots=(4096, 6 << 20)),
    "bad_granularity": ipc_buffer(gran=3 << 20),
}
write_corpus("ipc_buffer", ipc_seeds)
