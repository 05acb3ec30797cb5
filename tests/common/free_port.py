#!/usr/bin/env python3
"""A free TCP port on 127.0.0.1: the one helper the test and benchmark scripts share.

Shell:  port=$(python3 tests/common/free_port.py)
Python: sys.path.insert(0, "<repo>/tests/common"); from free_port import free_port

The port is free when this returns; whoever binds it next gets it, so bind it soon.
(C++ tests have their own, tests/runtime/launch.cc; nano-run's is launcher/prepare/port.cc.)
"""
import socket


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    print(free_port())
