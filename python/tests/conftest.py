"""Start the built gpured (path in $GPURED, as meson sets it; else the
build/ folder next to python/) on a temporary socket, CPU backend."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
# Test-only packages that the system's Python lacks, where quickstart.sh
# put them (the stock msgpack-RPC clients of test_stock_clients.py).
if os.environ.get("GPURED_TEST_PYDEPS"):
    sys.path.append(os.environ["GPURED_TEST_PYDEPS"])
TOP = os.path.dirname(os.path.dirname(HERE))

BACKEND = os.environ.get("GPURED_TEST_BACKEND") or "cpu"


def gpured_binary():
    exe = os.environ.get("GPURED")
    if exe:
        return exe
    guess = os.path.join(TOP, "build", "daemon", "gpured")
    return guess if os.access(guess, os.X_OK) else None


class Daemon:
    """A gpured process on its own socket; stop() with SIGTERM."""

    def __init__(self, *args):
        exe = gpured_binary()
        if exe is None:
            pytest.skip("no gpured binary: set $GPURED (meson test does)")
        self.dir = tempfile.mkdtemp(prefix="gpured-py-")
        self.path = os.path.join(self.dir, "gpured.sock")
        self.log = open(os.path.join(self.dir, "stderr"), "w+")
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        env.pop("LISTEN_FDS", None)
        self.proc = subprocess.Popen([exe, "--socket", self.path, "--backend", BACKEND, *args],
                                     stderr=self.log, env=env)
        end = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("gpured exited with %d: %s" % (self.proc.returncode, self.stderr()))
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(self.path)
                break
            except OSError:
                if time.monotonic() > end:
                    self.proc.kill()
                    raise RuntimeError("gpured did not start listening: " + self.stderr())
                time.sleep(0.02)
            finally:
                s.close()

    def stderr(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


@pytest.fixture(scope="session")
def daemon():
    d = Daemon("--threads", "2")
    yield d
    assert d.stop() == 0, "gpured did not exit cleanly"


@pytest.fixture
def make_daemon():
    """A daemon of the test's own, with extra options."""
    made = []

    def make(*args):
        d = Daemon(*args)
        made.append(d)
        return d
    yield make
    for d in made:
        d.stop()


@pytest.fixture
def client(daemon):
    import gpured
    with gpured.Client(daemon.path, timeout=30) as c:
        yield c
