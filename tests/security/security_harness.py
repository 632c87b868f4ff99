"""Hostile users at the socket level: a daemon that other users can reach,
code run in a child process under a uid of its own (attackers, victims),
a victim that measures how it is served, and the daemon's health as /proc
shows it.

Every test here runs as root, so that it can take other uids; without root,
or without GPURED (the daemon under test), the whole file is skipped with
exit code 77, which meson counts as a skip.
"""

import array
import ctypes
import fcntl
import json
import math
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import unittest

import msgpack
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "daemon"))
import gpured_harness  # noqa: E402
from gpured_harness import Client, Daemon  # noqa: E402

GPURED = gpured_harness.GPURED
KiB = 1 << 10
MiB = 1 << 20

# Set for the ASan and UBSan build, where everything is slower and the RSS
# means little (shadow memory, quarantine).
SANITIZED = os.environ.get("GPURED_SANITIZED", "") not in ("", "0")
# The longest a victim's request may take, from its first byte sent to its
# reply read, while an attack runs.
BOUND_S = 3.0 if SANITIZED else 1.0
# How long a victim waits for a reply before it counts the request as not
# served at all (and stops): long enough to tell "slow" from "stuck" in a
# failure's message, short enough to keep a failing test short.
HARD_TIMEOUT_S = 10.0

# Shmem is the host's: other processes may make some while a test runs.
# An attack that makes none may still see it grow by this much; a sparse
# memfd faulted in makes 512 MiB.
SHMEM_NOISE_KIB = 64 * KiB

# Unused uids, no user entries needed: attackers from the first, victims
# from the second.
ATTACKER_UIDS = (60001, 60002, 60003)
VICTIM_UID = 60010

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def main():
    """unittest.main(), or exit 77 (skipped) where the suite cannot run."""
    if not GPURED:
        print("GPURED is not set: skipping the security tests")
        sys.exit(77)
    if os.geteuid() != 0:
        print("not root: the security tests need to run clients under other uids; skipping")
        sys.exit(77)
    # a runner's SIGTERM (a meson timeout) still kills the children
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    try:
        unittest.main(verbosity=2)
    finally:
        kill_children()


def _die_with_parent():
    """SIGKILL this process when the one that made it goes."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# ---- the daemon ----


def reachable_tmp():
    """A directory for the socket's folder that other uids can reach: the
    temporary directory, unless one of the folders above it is closed to
    them (a private TMPDIR), then /tmp."""
    for d in (tempfile.gettempdir(), "/tmp"):
        d = os.path.realpath(d)
        parts = [d]
        while parts[-1] != "/":
            parts.append(os.path.dirname(parts[-1]))
        if all(os.stat(p).st_mode & 0o001 for p in parts):
            return d
    return "/tmp"


class SharedDaemon(Daemon):
    """The built gpured on a socket every uid may connect to: a temporary
    directory of mode 0755 and --socket-mode 0666. nofile: (soft, hard) for
    its RLIMIT_NOFILE, set in the child before exec. It dies with the test
    process; stop() kills it when SIGTERM is not enough."""

    def __init__(self, *args, nofile=None, env=None):
        self.nofile = nofile and possible_nofile(nofile)

        def preexec():
            _die_with_parent()
            if self.nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, self.nofile)

        self.killed = False
        self.stopped = False
        self.rc = None
        super().__init__("--socket-mode", "0666", *args, env=env, tmp=reachable_tmp(),
                         dir_mode=0o755, preexec_fn=preexec,
                         listen_timeout=30.0 if SANITIZED else 10.0)
        self.pid = self.proc.pid

    def stop(self, timeout=None):
        """SIGTERM, then SIGKILL after timeout; the exit code (negative for a
        signal). self.killed says whether SIGTERM was not enough."""
        if self.stopped:
            return self.rc
        self.stopped = True
        if timeout is None:
            timeout = 30.0 if SANITIZED else 10.0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.rc = self.proc.returncode
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.rc

    def stderr_tail(self, n=2000):
        try:
            self.log.flush()
            with open(self.log.name, errors="replace") as f:
                return f.read()[-n:]
        except (OSError, ValueError):
            return ""


CAP_SYS_RESOURCE = 24


def possible_nofile(nofile):
    """(soft, hard) as asked, but with the hard limit no higher than this
    process's own where it may not raise it (no CAP_SYS_RESOURCE, as in
    some containers)."""
    soft, hard = nofile
    now = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard > now and now != resource.RLIM_INFINITY:
        with open("/proc/self/status") as f:
            caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
        if not caps & (1 << CAP_SYS_RESOURCE):
            hard = now
    return (min(soft, hard), hard)


# ---- health, from /proc ----


def shmem_kib():
    """The host's Shmem (memfds, tmpfs, shared anonymous memory), KiB."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


class Health:
    """One look at the daemon: alive, open descriptors, RSS (KiB), threads,
    and the host's Shmem (KiB)."""

    def __init__(self, d):
        self.alive = d.proc.poll() is None
        self.fds = self.rss_kib = self.threads = 0
        if self.alive:
            try:
                self.fds = len(os.listdir("/proc/%d/fd" % d.pid))
                with open("/proc/%d/status" % d.pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.rss_kib = int(line.split()[1])
                        elif line.startswith("Threads:"):
                            self.threads = int(line.split()[1])
            except (FileNotFoundError, ProcessLookupError):
                self.alive = False
        self.shmem_kib = shmem_kib()

    def __repr__(self):
        return "Health(alive=%s, fds=%d, rss=%d KiB, threads=%d, Shmem=%d KiB)" % (
            self.alive, self.fds, self.rss_kib, self.threads, self.shmem_kib)


class Monitor:
    """The worst of the daemon's health over many looks."""

    def __init__(self, d):
        self.d = d
        self.samples = 0
        self.dead = False
        self.max_fds = self.max_rss_kib = self.max_threads = 0
        self.max_shmem_kib = 0

    def sample(self):
        h = Health(self.d)
        self.samples += 1
        if not h.alive:
            self.dead = True
            return h
        self.max_fds = max(self.max_fds, h.fds)
        self.max_rss_kib = max(self.max_rss_kib, h.rss_kib)
        self.max_threads = max(self.max_threads, h.threads)
        self.max_shmem_kib = max(self.max_shmem_kib, h.shmem_kib)
        return h

    def __repr__(self):
        return "Monitor(samples=%d, dead=%s, max fds=%d, max rss=%d KiB, max threads=%d, " \
               "max Shmem=%d KiB)" % (self.samples, self.dead, self.max_fds, self.max_rss_kib,
                                      self.max_threads, self.max_shmem_kib)


# ---- children under other uids ----

_children = []


class ChildFailed(AssertionError):
    pass


class ChildSilent(ChildFailed):
    """Nothing came from the child in time."""


class ChildContext:
    """What a child's fn gets: report() sends a value to the test process,
    stopped()/wait_stop() say when the test process wants it to end."""

    def __init__(self, wfd, ctlfd):
        self._w = wfd
        self._ctl = ctlfd

    def report(self, value):
        _write_msg(self._w, {"kind": "report", "value": value})

    def stopped(self, timeout=0.0):
        r, _, _ = select.select([self._ctl], [], [], timeout)
        return bool(r)

    def wait_stop(self, timeout=None):
        return self.stopped(timeout)


def _write_msg(fd, obj):
    data = (json.dumps(obj) + "\n").encode()
    while data:
        n = os.write(fd, data)
        data = data[n:]


class Child:
    """fn(ctx, *args) in a forked child whose uid and gids are all uid (no
    supplementary groups). What fn returns (JSON) and what it report()s come
    back over a pipe; kill() or kill_children() end it, whatever it does."""

    def __init__(self, uid, fn, *args, name=None):
        self.uid = uid
        self.name = name or "%s(uid %d)" % (fn.__name__, uid)
        r, w = os.pipe()
        cr, cw = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child
            code = 0
            try:
                os.close(r)
                os.close(cw)
                keep = {0, 1, 2, w, cr}
                for name_ in os.listdir("/proc/self/fd"):
                    fd = int(name_)
                    if fd not in keep:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                # the setting does not survive the change of uid: made after it
                _die_with_parent()
                if os.getppid() != parent:
                    os._exit(1)
                # as many descriptors as the hard limit allows
                soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                res = fn(ChildContext(w, cr), *args)
                _write_msg(w, {"kind": "done", "value": res})
            except BaseException:
                code = 1
                try:
                    _write_msg(w, {"kind": "error", "trace": traceback.format_exc()})
                except BaseException:
                    pass
            finally:
                os._exit(code)
        os.close(w)
        os.close(cr)
        self.pid = pid
        self._r = r
        self._ctl = cw
        self._buf = b""
        self._eof = False
        self.result = None
        self.done = False
        _children.append(self)

    def recv(self, timeout):
        """The next message from the child: a report's value, or the fn's
        result (then self.done). Raises ChildFailed when fn raised, the
        child died, or nothing came in time."""
        end = time.monotonic() + timeout
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                msg = json.loads(line)
                if msg["kind"] == "error":
                    raise ChildFailed("%s raised:\n%s" % (self.name, msg["trace"]))
                if msg["kind"] == "done":
                    self.done = True
                    self.result = msg["value"]
                return msg["value"]
            if self._eof:
                raise ChildFailed("%s ended without a result" % self.name)
            left = end - time.monotonic()
            if left <= 0:
                raise ChildSilent("%s sent nothing for %.1f s" % (self.name, timeout))
            rl, _, _ = select.select([self._r], [], [], left)
            if rl:
                data = os.read(self._r, 1 << 16)
                if not data:
                    self._eof = True
                self._buf += data

    def poll_msg(self):
        """A message if one is there now, else None."""
        try:
            return self.recv(0.0001)
        except ChildSilent:
            return None

    def stop(self):
        """Tell the child to finish (ctx.stopped() turns true)."""
        if self._ctl is not None:
            os.close(self._ctl)
            self._ctl = None

    def join(self, timeout):
        """stop(), then its result (after its reports), then reap it."""
        self.stop()
        end = time.monotonic() + timeout
        while not self.done:
            self.recv(max(0.001, end - time.monotonic()))
        self._reap(end - time.monotonic())
        return self.result

    def _reap(self, timeout):
        end = time.monotonic() + max(0.0, timeout)
        while self.pid:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.pid = 0
                break
            if time.monotonic() > end:
                self.kill()
                break
            time.sleep(0.01)

    def kill(self):
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0
        self.stop()
        if self._r is not None:
            os.close(self._r)
            self._r = None
        if self in _children:
            _children.remove(self)


def run_as(uid, fn, *args):
    """fn(ctx, *args) in a child under uid; the Child (see Child)."""
    return Child(uid, fn, *args)


def kill_children():
    while _children:
        _children[-1].kill()


# ---- descriptors and memfds ----


def send_fds(sock, data, fds):
    return sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def memfd(size, fill=None, seal=True, flags=0, name="gpured-security"):
    """A memfd of size bytes, MFD_ALLOW_SEALING, sealed against shrinking.
    fill: None (holes only), "zero" (posix_fallocate: allocated, zeros) or
    bytes written from the start."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING | flags)
    try:
        os.ftruncate(fd, size)
        if fill == "zero":
            os.posix_fallocate(fd, 0, size)
        elif fill is not None:
            os.pwrite(fd, fill, 0)
        if seal:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    except BaseException:
        os.close(fd)
        raise
    return fd


class RawClient(Client):
    """gpured_harness.Client plus descriptors and calls that return None
    instead of raising when the daemon closes the connection."""

    def __init__(self, path, timeout=HARD_TIMEOUT_S):
        super().__init__(path, timeout=timeout)

    def send_fds(self, data, fds):
        send_fds(self.sock, data, fds)

    def call_raw(self, method, params=(), fds=None):
        """[1, msgid, error, result], or None when the connection ended."""
        self.msgid += 1
        data = pack([0, self.msgid, method, list(params)])
        try:
            if fds:
                self.send_fds(data, fds)
            else:
                self.send(data)
            while True:
                resp = self.recv()
                # a refusal says msgid 0
                if resp is None or resp[1] in (self.msgid, 0):
                    return resp
        except (ConnectionResetError, BrokenPipeError):
            return None

    def map_memfd(self, fd, nbytes, **extra):
        return self.call_raw("map", [{"bytes": nbytes, "kind": "host", **extra}], fds=[fd])


# ---- the victim ----


def f32_case(n, seed):
    """n f32 elements of varied magnitude and sign, their bytes and their
    exact sum rounded once (math.fsum of the float64 values)."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    return a.tobytes(), math.fsum(a.astype(np.float64).tolist())


def victim(ctx, path, duration, bound, sizes=(MiB,), ping=True, reconnect=True, map_bytes=0,
           hard_timeout=HARD_TIMEOUT_S):
    """For duration seconds (at least one round, until stopped): connect
    (each round, with reconnect), ping, reduce an inline f32 sum of each
    size in bytes and check it against math.fsum, and with map_bytes map a
    filled memfd of that size, reduce it in place and unmap it. Each request
    waits at most hard_timeout for its reply. Returns {"rounds", "worst":
    {what: seconds}, "failures": [...]}; the first failure ends it."""
    cases = {n: f32_case(n // 4, seed=n) for n in sizes}
    region = None
    if map_bytes:
        region = f32_case(map_bytes // 4, seed=7)
    worst = {}
    failures = []
    rounds = 0
    c = None

    def note(what, dt):
        worst[what] = max(worst.get(what, 0.0), dt)
        if dt > bound:
            failures.append("%s took %.3f s (bound %.1f s)" % (what, dt, bound))

    def call(what, method, params, fds=None):
        """The reply's [error, result], or None after a failure."""
        t0 = time.monotonic()
        try:
            resp = c.call_raw(method, params, fds=fds)
        except socket.timeout:
            failures.append("%s: no reply within %.1f s" % (what, time.monotonic() - t0))
            return None
        except OSError as e:
            failures.append("%s: %s after %.3f s" % (what, e, time.monotonic() - t0))
            return None
        dt = time.monotonic() - t0
        if resp is None:
            failures.append("%s: the daemon closed the connection after %.3f s" % (what, dt))
            return None
        note(what, dt)
        if resp[2] is not None:
            failures.append("%s: error %r after %.3f s" % (what, resp[2], dt))
            return None
        return resp[2:]

    end = time.monotonic() + duration
    while not failures:
        if c is None:
            t0 = time.monotonic()
            try:
                c = RawClient(path, timeout=hard_timeout)
            except OSError as e:
                failures.append("connect: %s after %.3f s" % (e, time.monotonic() - t0))
                break
            note("connect", time.monotonic() - t0)
        if ping:
            r = call("ping", "ping", [])
            if r is None:
                break
            if r[1] != "pong":
                failures.append("ping: %r" % (r,))
        for n, (data, want) in cases.items():
            if failures:
                break
            what = "sum of %d KiB" % (n // KiB)
            r = call(what, "reduce", [{"op": "sum", "dtype": "f32", "data": data}])
            if r is None:
                break
            if r[1]["value"] != want or r[1]["count"] != n // 4:
                failures.append("%s: %r, want %r" % (what, r[1], want))
        if map_bytes and not failures:
            data, want = region
            fd = memfd(map_bytes, fill=data)
            try:
                r = call("map %d MiB" % (map_bytes // MiB), "map",
                         [{"bytes": map_bytes, "kind": "host"}], fds=[fd])
            finally:
                os.close(fd)
            if r is None:
                break
            rid = r[1]["region"]
            r = call("sum of a %d MiB region" % (map_bytes // MiB), "reduce",
                     [{"op": "sum", "dtype": "f32", "region": rid, "offset": 0,
                       "count": map_bytes // 4}])
            if r is None:
                break
            if r[1]["value"] != want:
                failures.append("region sum: %r, want %r" % (r[1], want))
                break
            if call("unmap", "unmap", [{"region": rid}]) is None:
                break
        rounds += 1
        if reconnect:
            c.close()
            c = None
        if time.monotonic() >= end or ctx.stopped():
            break
    if c is not None:
        c.close()
    return {"rounds": rounds, "worst": worst, "failures": failures}


# ---- the test case ----


class SecurityCase(unittest.TestCase):
    """A fresh daemon per test (DAEMON_ARGS, NOFILE), its health before the
    attack (self.start), and the checks every attack test makes."""

    DAEMON_ARGS = ()
    NOFILE = None
    # fds back "near" the start once the attackers are gone: within this many
    FDS_SLACK = 4

    def setUp(self):
        self.t0 = time.monotonic()
        self.d = SharedDaemon(*self.DAEMON_ARGS, nofile=self.NOFILE)
        self.addCleanup(self._stop_daemon)
        self.addCleanup(kill_children)
        self.warm_up()
        self.start = self.settle()
        self.info = self.root_call("info")[1]
        self.limits = self.info["limits"]

    def _stop_daemon(self):
        self.d.stop()
        sys.stderr.write("[%s: %.1f s]\n" % (self.id().split(".")[-1], time.monotonic() - self.t0))

    def root_call(self, method, params=(), timeout=HARD_TIMEOUT_S):
        c = RawClient(self.d.path, timeout=timeout)
        try:
            resp = c.call_raw(method, params)
        finally:
            c.close()
        self.assertIsNotNone(resp, "the daemon closed a connection from root")
        return resp[2:]

    def warm_up(self):
        """A ping and the sums the victims will ask for, so that the threads,
        pools and lazily made descriptors exist before the start is read."""
        c = RawClient(self.d.path, timeout=30)
        try:
            for n in (KiB, MiB):
                data, want = f32_case(n // 4, seed=n)
                resp = c.call_raw("reduce", [{"op": "sum", "dtype": "f32", "data": data}])
                assert resp is not None and resp[2] is None, resp
                assert resp[3]["value"] == want, (resp, want)
            fd = memfd(MiB, fill=bytes(MiB))
            try:
                resp = c.map_memfd(fd, MiB)
            finally:
                os.close(fd)
            assert resp is not None and resp[2] is None, resp
            resp = c.call_raw("unmap", [{"region": resp[3]["region"]}])
            assert resp is not None and resp[2] is None, resp
        finally:
            c.close()

    def settle(self, timeout=5.0, at_most=None):
        """The daemon's health once its descriptor count stops changing (or,
        with at_most, once it is down to that), after timeout at the latest."""
        end = time.monotonic() + timeout
        last, stable = None, 0
        while True:
            h = Health(self.d)
            if not h.alive:
                return h
            if at_most is not None and h.fds <= at_most:
                return h
            stable = stable + 1 if last is not None and h.fds == last.fds else 0
            last = h
            if (at_most is None and stable >= 5) or time.monotonic() > end:
                return h
            time.sleep(0.02)

    def spawn(self, uid, fn, *args):
        return run_as(uid, fn, *args)

    def ready(self, child, timeout=30.0):
        """The attacker's first report (it is set up), or a failure."""
        return child.recv(timeout * (2 if SANITIZED else 1))

    def watch(self, children, monitor, timeout):
        """Sample the daemon's health until every child in children is done
        (or timeout): their results, in order."""
        end = time.monotonic() + timeout
        while True:
            monitor.sample()
            pending = [ch for ch in children if not ch.done]
            if not pending:
                return [ch.result for ch in children]
            if time.monotonic() > end:
                raise ChildFailed("%s did not finish in %.0f s; daemon %r" % (
                    ", ".join(ch.name for ch in pending), timeout, monitor))
            for ch in pending:
                ch.poll_msg()
            time.sleep(0.03)

    def run_victims(self, monitor, duration=3.0, uids=(VICTIM_UID,), **kw):
        """Victims under uids, each for duration seconds, while the daemon's
        health is sampled; their results."""
        vs = [self.spawn(uid, _victim_kw, self.d.path, duration, BOUND_S, kw) for uid in uids]
        limit = duration + HARD_TIMEOUT_S * 3 + 10
        res = self.watch(vs, monitor, limit)
        for r in res:
            sys.stderr.write("victim: %d rounds, worst %s%s\n" % (
                r["rounds"], fmt_worst(r["worst"]),
                "; " + "; ".join(r["failures"]) if r["failures"] else ""))
        return res

    # ---- the checks ----

    def assertSurvived(self, victims, monitor, fds_max, rss_growth_kib, shmem_growth_kib):
        """assertServed for each victim's result and assertHealthy, every
        failure in one message."""
        problems = []
        for i, res in enumerate(victims):
            try:
                self.assertServed(res, "victim %d" % i if len(victims) > 1 else "the victim")
            except AssertionError as e:
                problems.append(str(e))
        try:
            self.assertHealthy(monitor, fds_max, rss_growth_kib, shmem_growth_kib)
        except AssertionError as e:
            problems.append(str(e))
        if problems:
            self.fail("\n".join(problems) + "\n(start %r; during the attack %r)" % (
                self.start, monitor))

    def assertServed(self, res, what="the victim"):
        if res["failures"]:
            self.fail("%s was not served: %s (worst latencies: %s)" % (
                what, "; ".join(res["failures"]), fmt_worst(res["worst"])))
        self.assertGreaterEqual(res["rounds"], 1, res)
        for k, v in res["worst"].items():
            self.assertLessEqual(v, BOUND_S, "%s: %s took %.3f s" % (what, k, v))

    def assertHealthy(self, monitor, fds_max, rss_growth_kib, shmem_growth_kib):
        """Alive throughout, and at most fds_max descriptors, start + rss
        growth of RSS (not checked in a sanitized build) and start + growth
        of the host's Shmem; every failure in one message."""
        problems = []
        if monitor.dead or not Health(self.d).alive:
            problems.append("the daemon died: rc %r, stderr:\n%s" % (
                self.d.proc.poll(), self.d.stderr_tail()))
        if monitor.max_fds > fds_max:
            problems.append("the daemon held %d descriptors (start %d, bound %d)" % (
                monitor.max_fds, self.start.fds, fds_max))
        if not SANITIZED and monitor.max_rss_kib > self.start.rss_kib + rss_growth_kib:
            problems.append("the daemon's RSS grew from %d to %d KiB (bound +%d KiB)" % (
                self.start.rss_kib, monitor.max_rss_kib, rss_growth_kib))
        if monitor.max_shmem_kib > self.start.shmem_kib + shmem_growth_kib:
            problems.append("the host's Shmem grew from %d to %d KiB (bound +%d KiB)" % (
                self.start.shmem_kib, monitor.max_shmem_kib, shmem_growth_kib))
        if problems:
            self.fail("\n".join(problems))

    def assertRecovered(self, timeout=None):
        """Once the attackers are gone: the daemon alive, answering root at
        once, its descriptors back near the start; then a clean exit on
        SIGTERM."""
        if timeout is None:
            timeout = 20.0 if SANITIZED else 10.0
        kill_children()
        h = self.settle(timeout, at_most=self.start.fds + self.FDS_SLACK)
        self.assertTrue(h.alive, "the daemon died: stderr:\n" + self.d.stderr_tail())
        self.assertLessEqual(h.fds, self.start.fds + self.FDS_SLACK,
                             "descriptors did not come back: %d, at the start %d" % (
                                 h.fds, self.start.fds))
        t0 = time.monotonic()
        self.assertEqual(self.root_call("ping"), [None, "pong"])
        self.assertLessEqual(time.monotonic() - t0, BOUND_S)
        rc = self.d.stop()
        self.assertFalse(self.d.killed, "the daemon did not exit on SIGTERM")
        self.assertEqual(rc, 0, "the daemon exited with %r: %s" % (rc, self.d.stderr_tail()))


def _victim_kw(ctx, path, duration, bound, kw):
    return victim(ctx, path, duration, bound, **kw)


def fmt_worst(worst):
    return ", ".join("%s %.3f s" % (k, v) for k, v in sorted(worst.items()))
