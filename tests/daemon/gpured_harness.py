"""Start the built gpured on a temporary socket and talk to it over raw
sockets, with msgpack (Debian's python3-msgpack) as an independent codec."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import msgpack

GPURED = os.environ.get("GPURED", "")
# The backend under test: the CPU unless the GPU host asks for "cuda".
BACKEND = os.environ.get("GPURED_TEST_BACKEND") or "cpu"

_packers = threading.local()


def pack(obj):
    """obj in msgpack, as msgpack.packb(obj, use_bin_type=True) has it,
    from one Packer per thread: packb makes a Packer, and with it a
    buffer of a megabyte, each call, which glibc fills byte by byte where
    MALLOC_PERTURB_ is set (meson test sets it), and freeing it fills it
    again."""
    p = getattr(_packers, "packer", None)
    if p is None:
        p = _packers.packer = msgpack.Packer(use_bin_type=True)
    return p.pack(obj)


class Daemon:
    """tmp: where its directory goes; dir_mode: that directory's mode (so
    that other users reach the socket); preexec_fn: run in the child
    before exec (limits, say)."""

    def __init__(self, *args, env=None, tmp=None, dir_mode=None, preexec_fn=None,
                 listen_timeout=10.0):
        self.dir = tempfile.mkdtemp(prefix="gpured-test-", dir=tmp)
        if dir_mode is not None:
            os.chmod(self.dir, dir_mode)
        self.path = os.path.join(self.dir, "gpured.sock")
        route = []
        if BACKEND == "cuda" and "--route-cpu-max-bytes" not in args:
            # the GPU under test, small requests included, unless a test
            # asks for the CPU route
            route = ["--route-cpu-max-bytes", "0"]
        self.args = [GPURED, "--socket", self.path, "--backend", BACKEND, *route, *args]
        self.log = open(os.path.join(self.dir, "stderr"), "w+")
        e = dict(os.environ)
        e.pop("NOTIFY_SOCKET", None)
        e.pop("LISTEN_FDS", None)
        if env:
            e.update(env)
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stderr=self.log, env=e,
                                     preexec_fn=preexec_fn)
        self.wait_listening(listen_timeout)

    def wait_listening(self, timeout=10.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("gpured exited with %d: %s" % (self.proc.returncode, self.stderr()))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
                return
            except OSError:
                time.sleep(0.02)
            finally:
                s.close()
        raise RuntimeError("gpured did not start listening: " + self.stderr())

    def stderr(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def rss_hwm_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self, timeout=10.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        self.log.close()
        rc = self.proc.returncode
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


class Client:
    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=64 << 20)
        # recv() reads into this: sock.recv(n) allocates n bytes each call
        # and frees what the read left, both filled where MALLOC_PERTURB_
        # is set
        self.buf = memoryview(bytearray(1 << 16))
        self.msgid = 0

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method, params, msgid=None):
        if msgid is None:
            self.msgid += 1
            msgid = self.msgid
        self.send(pack([0, msgid, method, params]))
        return msgid

    def recv(self):
        """The next message, or None at end of stream."""
        while True:
            for obj in self.unpacker:
                return obj
            n = self.sock.recv_into(self.buf)
            if not n:
                return None
            self.unpacker.feed(self.buf[:n])

    def call(self, method, params=()):
        msgid = self.request(method, list(params))
        resp = self.recv()
        assert resp is not None, "connection closed"
        assert resp[0] == 1 and resp[1] == msgid, resp
        return resp[2], resp[3]

    def reduce(self, op, dtype, data):
        return self.call("reduce", [{"op": op, "dtype": dtype, "data": data}])

    def closed(self):
        """True when the server closed the connection (after any replies)."""
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
