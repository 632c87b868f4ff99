#!/usr/bin/env python3
"""Socket activation for real: systemd-socket-activate creates and listens
on a socket, starts gpured on the first connection with the listening
socket passed (LISTEN_FDS=1, fd 3), as gpured.socket does. The daemon must
serve on that socket and bind none of its own (not even the one --socket
names), exit 0 on SIGTERM, and leave the socket path in place, since it did
not create it. Passing two sockets, or a datagram socket, must make it
refuse to start.

usage: socket-activate.py GPURED [GPUREDCTL]
"""

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

# No __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grtest  # noqa: E402
from grtest import fail  # noqa: E402


def wait_path(path, proc, deadline):
    while not os.path.exists(path):
        if proc.poll() is not None:
            fail("systemd-socket-activate exited %d before listening" % proc.returncode)
        if time.monotonic() > deadline:
            fail("%s never appeared" % path)
        time.sleep(0.02)


def activate(args, tmp, log_name):
    log = open(os.path.join(tmp, log_name), "w")
    proc = subprocess.Popen(["systemd-socket-activate"] + args, stdout=log,
                            stderr=subprocess.STDOUT, env=grtest.clean_env(tmp))
    return proc, log.name


def serves(gpured, gpuredctl, tmp):
    path = os.path.join(tmp, "activated.sock")
    # Named, but to be ignored: a passed socket wins over --socket.
    unused = os.path.join(tmp, "not-this.sock")
    proc, log = activate(["-l", path, gpured, "--backend", "cpu", "--socket", unused], tmp,
                         "serve.log")
    try:
        wait_path(path, proc, time.monotonic() + 10)
        # The first connection starts the daemon; it must answer on it.
        err = grtest.raw_ping(path, timeout=30)
        if err:
            fail("%s\n--- daemon log:\n%s" % (err, grtest.tail(log)))
        err = grtest.ctl_ping(gpuredctl, path) or grtest.raw_ping(path, msgid=9)
        if err:
            fail("second ping: %s\n--- daemon log:\n%s" % (err, grtest.tail(log)))
        # It served the passed socket and bound none of its own.
        own = [f for f in os.listdir(tmp) if f.endswith(".sock") and f != "activated.sock"]
        if own:
            fail("the daemon created %s besides using the passed socket" % own)

        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            fail("no exit within 15 s of SIGTERM\n--- daemon log:\n%s" % grtest.tail(log))
        if rc != 0:
            fail("exit status %d after SIGTERM\n--- daemon log:\n%s" % (rc, grtest.tail(log)))
        try:
            st = os.stat(path)
        except FileNotFoundError:
            fail("the daemon removed %s, which it did not create" % path)
        if not stat.S_ISSOCK(st.st_mode):
            fail("%s is no longer a socket" % path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def refuses(gpured, tmp, what, args):
    """The daemon is handed sockets it cannot use: it must exit non-zero."""
    paths = [a for a in args if a.endswith(".sock")]
    proc, log = activate(args + [gpured, "--backend", "cpu"], tmp, what + ".log")
    poke = None
    try:
        wait_path(paths[0], proc, time.monotonic() + 10)
        # systemd-socket-activate starts the daemon on the first connection
        # (or datagram).
        if "--datagram" in args:
            poke = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            poke.sendto(b"x", paths[0])
        else:
            # the path appears at bind(), a moment before listen(): until
            # then a connection is refused, so try again for a while
            deadline = time.monotonic() + 10
            while True:
                poke = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    poke.connect(paths[0])
                    break
                except ConnectionRefusedError:
                    poke.close()
                    poke = None
                    if time.monotonic() > deadline:
                        fail("%s: %s refused connections for 10 s" % (what, paths[0]))
                    time.sleep(0.01)
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            fail("%s: the daemon kept running\n--- daemon log:\n%s" % (what, grtest.tail(log)))
        if rc == 0:
            fail("%s: the daemon exited 0\n--- daemon log:\n%s" % (what, grtest.tail(log)))
        for p in paths:
            if not os.path.exists(p):
                fail("%s: the daemon removed %s, which it did not create" % (what, p))
        print("ok: %s refused (exit %d)" % (what, rc))
    finally:
        if poke:
            poke.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main():
    if len(sys.argv) < 2:
        fail("usage: socket-activate.py GPURED [GPUREDCTL]")
    gpured = sys.argv[1]
    gpuredctl = sys.argv[2] if len(sys.argv) > 2 else None
    if not shutil.which("systemd-socket-activate"):
        grtest.skip("systemd-socket-activate not found (Debian package systemd)")
    tmp = tempfile.mkdtemp(prefix="gpured-activate-")
    try:
        serves(gpured, gpuredctl, tmp)
        print("ok: served on the passed socket, exit 0 on SIGTERM, socket left in place")
        refuses(gpured, tmp, "two sockets",
                ["-l", os.path.join(tmp, "two-a.sock"), "-l", os.path.join(tmp, "two-b.sock")])
        refuses(gpured, tmp, "a datagram socket",
                ["--datagram", "-l", os.path.join(tmp, "dgram.sock")])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
