"""The soak's attackers (--attackers): the security suite's attacks
(tests/security) in a loop for the whole run, from two attacker uids,
beside the legitimate clients.

A supervisor process, forked from the soak before any client thread
starts, runs each attack as a security_harness.Child under an attacker
uid, holds it for a few seconds, stops it (kills it if it does not end)
and starts it again, under the other attacker uid each time. Only one run
of each attack is under way at a time, and each is bounded: a fixed number
of connections and descriptors, TCP sockets on 127.0.0.1 only, the
daemon's socket and nothing else. The soak pauses the attackers for its
baseline sample and stops them before its final one.

The legitimate clients run as a third uid: each client thread drops its
own credentials with the raw system calls (glibc's setresuid would change
every thread's), so that the soak's main thread stays root to sample
/proc/PID of the daemon and to start and stop it.
"""

import ctypes
import json
import os
import platform
import random
import select
import signal
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SECURITY = os.path.normpath(os.path.join(HERE, os.pardir, "security"))

KiB = 1 << 10
MiB = 1 << 20

# How long one run of an attack holds what it took, and the pause before
# it starts again, in seconds.
HOLD_S = (5.0, 20.0)
RESTART_S = (0.5, 2.0)
# An attack told to stop that has not ended by then is killed.
JOIN_S = 20.0


def load():
    """The security harness and the attack functions of its tests; exits
    with the reason when they cannot be imported."""
    sys.path.insert(0, SECURITY)
    try:
        import security_harness as sh
        from test_fd_exhaustion import PER_CONNECTION, park_attack
        from test_fd_linger import linger_attack
        from test_half_sent import half_sent_attack
        from test_inflight import slow_stream_attack, stream_attack
        from test_sparse_memfd import SPARSE_BYTES, sparse_attack
        from test_two_users import hog_connections, hog_mappings
    except ImportError as e:
        sys.exit("--attackers: cannot import the security harness from %s (%s); it needs Debian's "
                 "/usr/bin/python3 with python3-msgpack and python3-numpy" % (SECURITY, e))
    # name, function, its arguments after the socket's path, the attacker
    # (0 or 1) of its first run; the first runs split as test_all_at_once
    # does
    attacks = [
        # 20 TCP sockets to a listener on 127.0.0.1, send buffers full,
        # SO_LINGER 10 s, passed by SCM_RIGHTS with a ping, a map or the
        # first bytes of a request
        ("linger", linger_attack, (20,), 0),
        # 48 connections announcing 256 KiB, 1 MiB or 16 MiB and sending 4 KiB
        ("half_sent", half_sent_attack, ([256 * KiB, MiB, 16 * MiB], 48), 0),
        # 16 connections each trickling a 64 MiB request, 16 KiB every 50 ms
        ("slow_stream", slow_stream_attack, (16, 64 * MiB), 0),
        # 8 connections sending 64 MiB requests back to back
        ("stream", stream_attack, (8, 64 * MiB), 0),
        # as many connections as the daemon gives, at most 128, held
        ("hold_connections", hog_connections, (128,), 0),
        # 3 memfds of 512 MiB that are holes, mapped; the memfds kept
        ("sparse_memfd", sparse_attack, (SPARSE_BYTES, 3), 1),
        # filled 16 MiB memfds mapped on one connection, at most 8, held
        ("hold_mappings", hog_mappings, (16 * MiB, 8), 1),
        # up to 600 connections, 16 descriptors of /dev/null parked on each
        ("park_fds", park_attack, (600, PER_CONNECTION), 1),
    ]
    return sh, attacks


# ---------------------------------------------------------------- the legitimate clients' uid

# (setgroups, setresuid, setresgid): the raw system calls, which change the
# calling thread's credentials alone
_SYSCALLS = {"x86_64": (116, 117, 119), "aarch64": (159, 147, 149)}
_libc = ctypes.CDLL(None, use_errno=True)


def thread_uid_supported():
    return platform.machine() in _SYSCALLS


def become_in_this_thread(uid):
    """Drop this thread's credentials to uid (gids likewise, no
    supplementary groups), for good; the process's other threads keep
    theirs."""
    setgroups, setresuid, setresgid = _SYSCALLS[platform.machine()]
    for nr, args in ((setgroups, (0, None)), (setresgid, (uid, uid, uid)), (setresuid, (uid, uid, uid))):
        if _libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if a is not None else None for a in args]) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "syscall %d: %s" % (nr, os.strerror(e)))
    if os.geteuid() != uid:
        raise OSError("this thread's uid is %d, not %d" % (os.geteuid(), uid))


# ---------------------------------------------------------------- the supervisor (a process)


def _send(fd, obj):
    data = (json.dumps(obj, default=str) + "\n").encode()
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _short(v, n=600):
    s = json.dumps(v, default=str)
    return v if len(s) <= n else s[:n] + "..."


class _Slot:
    def __init__(self, name, fn, args, first):
        self.name = name
        self.fn = fn
        self.args = args
        self.runs = 0
        self.first = first
        self.child = None
        self.uid = None
        self.t0 = 0.0
        self.until = 0.0
        self.next_start = 0.0
        self.report = None


def supervise(cmd_fd, ev_fd, path, uids, seed):
    """The supervisor's loop: commands (a line each) come on cmd_fd:
    resume, pause, stop; events go to ev_fd as JSON lines: every run's
    end, and paused or stopped once every run has ended."""
    sh, attacks = load()
    rng = random.Random(seed)
    slots = [_Slot(name, fn, (path,) + args, first) for name, fn, args, first in attacks]
    paused = True
    buf = b""

    def start(s):
        s.uid = uids[(s.first + s.runs) % len(uids)]
        s.runs += 1
        s.report = None
        s.t0 = time.monotonic()
        s.until = s.t0 + rng.uniform(*HOLD_S)
        s.child = sh.Child(s.uid, s.fn, *s.args, name="%s(uid %d)" % (s.name, s.uid))

    def ended(s, outcome, result=None, error=None):
        ev = {"ev": "end", "attack": s.name, "uid": s.uid, "outcome": outcome,
              "seconds": round(time.monotonic() - s.t0, 2), "report": _short(s.report),
              "result": _short(result)}
        if error:
            ev["error"] = error[-800:]
        _send(ev_fd, ev)
        s.child.kill()
        s.child = None
        s.next_start = time.monotonic() + rng.uniform(*RESTART_S)

    def drain(s):
        """Messages the run sent; True when it is over (returned or failed)."""
        try:
            while True:
                v = s.child.poll_msg()
                if s.child.done:
                    ended(s, "returned", result=v)
                    return True
                if v is None:
                    return False
                if s.report is None:
                    s.report = v
        except sh.ChildFailed as e:
            ended(s, "failed", error=str(e))
            return True

    def stop_all(deadline):
        """Tell every run to stop, then collect each: its result, or kill it."""
        running = [s for s in slots if s.child is not None]
        for s in running:
            s.child.stop()
        for s in running:
            try:
                res = s.child.join(max(0.5, deadline - time.monotonic()))
                ended(s, "stopped", result=res)
            except sh.ChildSilent as e:
                ended(s, "killed", error=str(e))
            except sh.ChildFailed as e:
                ended(s, "failed", error=str(e))

    while True:
        r, _, _ = select.select([cmd_fd], [], [], 0.05)
        if r:
            data = os.read(cmd_fd, 4096)
            buf += data if data else b"\nstop\n"
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                cmd = line.decode().strip()
                if cmd == "resume":
                    paused = False
                    now = time.monotonic()
                    for s in slots:
                        s.next_start = now + rng.uniform(0, RESTART_S[1])
                elif cmd in ("pause", "stop"):
                    paused = True
                    stop_all(time.monotonic() + JOIN_S)
                    _send(ev_fd, {"ev": "paused" if cmd == "pause" else "stopped"})
                    if cmd == "stop":
                        return
        if paused:
            continue
        now = time.monotonic()
        for s in slots:
            if s.child is None:
                if now >= s.next_start:
                    try:
                        start(s)
                    except OSError as e:
                        s.child = None
                        s.next_start = now + RESTART_S[1]
                        _send(ev_fd, {"ev": "end", "attack": s.name, "uid": s.uid, "outcome": "not_started",
                                      "seconds": 0, "error": repr(e)})
                continue
            if drain(s):
                continue
            if now >= s.until:
                s.child.stop()
                try:
                    res = s.child.join(JOIN_S)
                    ended(s, "stopped", result=res)
                except sh.ChildSilent as e:
                    ended(s, "killed", error=str(e))
                except sh.ChildFailed as e:
                    ended(s, "failed", error=str(e))


# ---------------------------------------------------------------- the soak's side


class Attackers:
    """The supervisor, seen from the soak: resume(), pause() and stop(),
    and what every run of every attack came to (summary())."""

    def __init__(self, path, uids, seed, log=print):
        sh, attacks = load()
        self.names = [a[0] for a in attacks]
        self.uids = list(uids)
        self.log = log
        self.lock = threading.Lock()
        self.by = {name: {"runs": 0, "by_outcome": {}, "by_uid": {}, "seconds": 0.0,
                          "first_report": None, "examples": []} for name in self.names}
        self.events = 0
        self.reply = threading.Event()
        self.reply_kind = None
        self.gone = False
        cmd_r, cmd_w = os.pipe()
        ev_r, ev_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(cmd_w)
                os.close(ev_r)
                sh._die_with_parent()
                if os.getppid() != parent:
                    os._exit(1)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                supervise(cmd_r, ev_w, path, self.uids, seed)
            except BaseException:
                code = 1
                try:
                    _send(ev_w, {"ev": "crashed", "trace": traceback.format_exc()})
                except BaseException:
                    pass
            finally:
                os._exit(code)
        os.close(cmd_r)
        os.close(ev_w)
        self.pid = pid
        self.cmd = cmd_w
        self.ev = ev_r
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        buf = b""
        while True:
            try:
                data = os.read(self.ev, 1 << 16)
            except OSError:
                data = b""
            if not data:
                self.gone = True
                self.reply.set()
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self._event(json.loads(line))

    def _event(self, ev):
        kind = ev.get("ev")
        if kind == "end":
            with self.lock:
                self.events += 1
                a = self.by[ev["attack"]]
                a["runs"] += 1
                o = ev["outcome"]
                a["by_outcome"][o] = a["by_outcome"].get(o, 0) + 1
                u = a["by_uid"].setdefault(str(ev["uid"]), {"runs": 0})
                u["runs"] += 1
                a["seconds"] = round(a["seconds"] + ev["seconds"], 1)
                if a["first_report"] is None and ev.get("report") is not None:
                    a["first_report"] = ev["report"]
                # the first two runs of each, and the first five that failed
                shown = a["runs"] <= 2
                if o in ("failed", "killed", "not_started") and len(a["examples"]) < 5:
                    a["examples"].append(ev)
                    shown = True
            if shown:
                self.log("attack %s (uid %s) %s after %.1f s: report %s%s%s" % (
                    ev["attack"], ev["uid"], o, ev["seconds"], json.dumps(ev.get("report")),
                    "; result %s" % json.dumps(ev["result"]) if ev.get("result") is not None else "",
                    "; " + ev["error"].strip().splitlines()[-1] if ev.get("error") else ""))
        elif kind in ("paused", "stopped"):
            self.reply_kind = kind
            self.reply.set()
        elif kind == "crashed":
            self.log("the attack supervisor crashed:\n" + ev.get("trace", ""))

    def _command(self, cmd, wait_for=None, timeout=120.0):
        if self.gone:
            return False
        self.reply.clear()
        self.reply_kind = None
        try:
            os.write(self.cmd, (cmd + "\n").encode())
        except OSError:
            return False
        if wait_for is None:
            return True
        return self.reply.wait(timeout) and self.reply_kind == wait_for

    def resume(self):
        return self._command("resume")

    def pause(self):
        """Every attack stopped and its children gone; False if not in time."""
        return self._command("pause", "paused")

    def stop(self):
        """The supervisor stopped and reaped; False if it had to be killed."""
        ok = self._command("stop", "stopped")
        if not ok:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.reader.join(5)
        try:
            os.close(self.cmd)
        except OSError:
            pass
        return ok

    def runs(self):
        with self.lock:
            return self.events, sum(a["by_outcome"].get("failed", 0) + a["by_outcome"].get("killed", 0)
                                    for a in self.by.values())

    def summary(self):
        with self.lock:
            return json.loads(json.dumps({"uids": self.uids, "by_attack": self.by}))
