#!/usr/bin/env python3
"""A stranger on the network of a job (tests/multihost, run on a test-bed host that is not one
of the job's): attacks every port the job listens on, for as long as it runs.

    stranger.py TARGETS_FILE STOP_FILE REPORT_FILE

TARGETS_FILE holds "ADDRESS:PORT" lines (the test rewrites it as the job's listeners come and
go). Every new target gets, from this host: a flood of connections held open, junk bytes, a
c10d TCPStore client's "set" of a key, nano's job store greeting answered wrongly, and a hello
of a rank shim with a made-up answer; connections are made again and again while the target
listens. Ends when STOP_FILE exists; REPORT_FILE gets one line per target: connections made,
connections refused or timed out, and bytes it got back.
"""
import os
import socket
import struct
import sys
import time

FLOOD = 100  # connections held open per target at a time


def attempt(address, port, payload):
    """One connection, `payload` sent on it. Returns the socket, or None when it was refused or
    not made within a moment (a listener closed to this host drops the attempt)."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError:  # out of descriptors: try again on the next round
        return None
    s.settimeout(0.2)
    try:
        s.connect((address, port))
        s.setblocking(False)
        if payload:
            s.send(payload)
    except OSError:
        s.close()
        return None
    return s


def tcpstore_set(key, value):
    # c10d's TCPStore client: a query type byte (SET = 0), then key and value, each as a
    # 64-bit little-endian length and its bytes.
    return b"\x00" + struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(value)) + value


def nano_store_answer():
    # nano's job store frame: [answer, challenge], with an answer made up.
    fields = [os.urandom(32), os.urandom(16)]
    body = b"".join(struct.pack("<I", len(f)) + f for f in fields)
    return struct.pack("<I", len(body)) + body


def shim_hello():
    payload = b"0 hostC " + b"00" * 32
    return b"h" + struct.pack("<I", len(payload)) + payload


PAYLOADS = [
    b"",
    os.urandom(512),
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    tcpstore_set(b"nano/rank/0", b"stranger"),
    tcpstore_set(b"0/0", os.urandom(128)),
    nano_store_answer(),
    shim_hello(),
]


def main():
    targets_file, stop_file, report_file = sys.argv[1:4]
    report = {}
    held = {}
    while not os.path.exists(stop_file):
        try:
            with open(targets_file) as f:
                targets = [line.strip() for line in f if line.strip()]
        except OSError:
            targets = []
        for target in targets:
            address, port = target.rsplit(":", 1)
            r = report.setdefault(target, [0, 0, 0])
            sockets = held.setdefault(target, [])
            # Up to FLOOD connections held open to it, a few more each round so every target
            # gets its turn; each new one sends the next payload of the list.
            for _ in range(min(20, FLOOD - len(sockets))):
                s = attempt(address, int(port), PAYLOADS[(r[0] + r[1]) % len(PAYLOADS)])
                if s is None:
                    r[1] += 1
                    break
                r[0] += 1
                sockets.append(s)
            # Those the target closed make room for new ones.
            alive = []
            for s in sockets:
                try:
                    data = s.recv(4096)
                    if data == b"":
                        s.close()
                        continue
                    r[2] += len(data)
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    continue
                alive.append(s)
            held[target] = alive
        time.sleep(0.02)
    with open(report_file, "w") as f:
        for target, (made, failed, got) in sorted(report.items()):
            f.write(f"{target} made {made} failed {failed} got {got}\n")


if __name__ == "__main__":
    main()
