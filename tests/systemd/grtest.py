"""Helpers for the systemd tests: a raw msgpack-RPC ping (standard library
only, so the tests do not lean on the client library they may be testing
alongside), gpuredctl, and test outcomes in meson's exit codes."""

import os
import socket
import struct
import subprocess
import sys
import time

SKIP = 77


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(SKIP)


class NeedMore(Exception):
    pass


def _take(buf, pos, n):
    if pos + n > len(buf):
        raise NeedMore()
    return buf[pos:pos + n], pos + n


def mp_decode(buf, pos=0):
    """Decode one msgpack object at buf[pos:]: (object, next position).
    Raises NeedMore when buf ends inside it."""
    b, pos = _take(buf, pos, 1)
    t = b[0]
    if t <= 0x7f:
        return t, pos
    if t >= 0xe0:
        return t - 0x100, pos
    if 0xa0 <= t <= 0xbf:
        s, pos = _take(buf, pos, t & 0x1f)
        return s.decode("utf-8", "replace"), pos
    if 0x90 <= t <= 0x9f:
        return _array(buf, pos, t & 0x0f)
    if 0x80 <= t <= 0x8f:
        return _map(buf, pos, t & 0x0f)
    if t == 0xc0:
        return None, pos
    if t in (0xc2, 0xc3):
        return t == 0xc3, pos
    fixed = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q",
             0xd0: ">b", 0xd1: ">h", 0xd2: ">i", 0xd3: ">q",
             0xca: ">f", 0xcb: ">d"}
    if t in fixed:
        raw, pos = _take(buf, pos, struct.calcsize(fixed[t]))
        return struct.unpack(fixed[t], raw)[0], pos
    lens = {0xd9: ">B", 0xda: ">H", 0xdb: ">I",   # str
            0xc4: ">B", 0xc5: ">H", 0xc6: ">I",   # bin
            0xdc: ">H", 0xdd: ">I",               # array
            0xde: ">H", 0xdf: ">I"}               # map
    if t in lens:
        raw, pos = _take(buf, pos, struct.calcsize(lens[t]))
        n = struct.unpack(lens[t], raw)[0]
        if t in (0xdc, 0xdd):
            return _array(buf, pos, n)
        if t in (0xde, 0xdf):
            return _map(buf, pos, n)
        s, pos = _take(buf, pos, n)
        return (s.decode("utf-8", "replace") if t >= 0xd9 else bytes(s)), pos
    raise ValueError("msgpack type 0x%02x not expected in a reply" % t)


def _array(buf, pos, n):
    out = []
    for _ in range(n):
        v, pos = mp_decode(buf, pos)
        out.append(v)
    return out, pos


def _map(buf, pos, n):
    out = {}
    for _ in range(n):
        k, pos = mp_decode(buf, pos)
        v, pos = mp_decode(buf, pos)
        out[k] = v
    return out, pos


def raw_ping(path, msgid=7, timeout=10.0):
    """Send [0, msgid, "ping", []] on a fresh connection to path and return
    None if the reply is [1, msgid, nil, "pong"], else what went wrong.
    The connection is made at once, without retrying."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(path)
        except OSError as e:
            return "cannot connect to %s: %s" % (path, e)
        s.sendall(bytes([0x94, 0x00, msgid, 0xa4]) + b"ping" + bytes([0x90]))
        buf = b""
        while True:
            try:
                chunk = s.recv(4096)
            except OSError as e:
                return "no reply to ping: %s" % e
            if not chunk:
                return "connection closed before a reply to ping (got %r)" % buf
            buf += chunk
            try:
                reply, _ = mp_decode(buf)
                break
            except NeedMore:
                continue
        if reply != [1, msgid, None, "pong"]:
            return "ping answered %r" % (reply,)
        return None
    finally:
        s.close()


def wait_answering(path, proc, timeout=30.0):
    """Ping path until it answers (the file exists between bind() and
    listen(), refusing connections): None, or what went wrong."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            return "the daemon exited %d" % proc.returncode
        err = raw_ping(path)
        if err is None or not err.startswith("cannot connect"):
            return err
        if time.monotonic() > deadline:
            return err
        time.sleep(0.02)


def ctl_ping(gpuredctl, path, timeout=10.0):
    """gpuredctl --socket path ping: None on success, else what went wrong."""
    if not gpuredctl:
        return None
    try:
        r = subprocess.run([gpuredctl, "--socket", path, "ping"], capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "gpuredctl ping timed out"
    if r.returncode != 0:
        return "gpuredctl ping exited %d: %s" % (r.returncode, r.stderr.strip())
    return None


def clean_env(tmpdir):
    """The environment for a daemon under test: no inherited service-manager
    variables, and a private XDG_RUNTIME_DIR so a default socket path
    would land in tmpdir."""
    env = dict(os.environ)
    for k in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET",
              "WATCHDOG_USEC", "WATCHDOG_PID", "GPURED_SOCKET"):
        env.pop(k, None)
    env["XDG_RUNTIME_DIR"] = tmpdir
    return env


def tail(path, n=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""
