"""The soak's wire: msgpack framing, a connection to the daemon, request
builders, sealed memfds, and the constants every part shares."""

import array
import fcntl
import os
import socket
import struct

import msgpack

KiB = 1 << 10
MiB = 1 << 20
DTYPES = {"i32": "i", "i64": "q", "u32": "I", "u64": "Q", "f32": "f", "f64": "d"}
OPS = ("sum", "min", "max", "sumsq")
# Elements in the pool every request's data is cut from. A prime, so that
# the pool's period never lines up with the daemon's chunks.
POOL = 65521
U = 2.0 ** -53


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def memfd(size, seal=True):
    fd = os.memfd_create("gpured-soak", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if size:
        os.posix_fallocate(fd, 0, size)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd


def fbits(x):
    return struct.pack("<d", x)


class Conn:
    def __init__(self, path, timeout):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=64 * MiB)
        self.msgid = 0

    def close(self):
        self.sock.close()

    def next_id(self):
        self.msgid = (self.msgid + 1) % (1 << 32)
        return self.msgid

    def send(self, data, fds=None):
        """data, with fds in SCM_RIGHTS beside its first byte if any."""
        if fds:
            self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            self.sock.sendall(data)

    def recv(self):
        """The next message, or None at end of stream."""
        while True:
            for obj in self.unpacker:
                return obj
            data = self.sock.recv(1 << 16)
            if not data:
                return None
            self.unpacker.feed(data)

    def recv_all(self):
        """Every message until the daemon closes; None if it did not close
        within the timeout."""
        out = []
        try:
            while True:
                m = self.recv()
                if m is None:
                    return out
                out.append(m)
        except (ConnectionResetError, BrokenPipeError):
            return out
        except socket.timeout:
            return None

    def call(self, method, params=(), fds=None):
        msgid = self.next_id()
        self.send(pack([0, msgid, method, list(params)]), fds)
        resp = self.recv()
        if resp is None:
            raise ConnectionError("closed while waiting for %s" % method)
        if resp[0] != 1 or resp[1] != msgid:
            raise ConnectionError("response %r to %s msgid %d" % (resp, method, msgid))
        return resp


def reduce_msg(msgid, op, dtype, data):
    return pack([0, msgid, "reduce", [{"op": op, "dtype": dtype, "data": data}]])


def reduce_header(msgid, op, dtype, nbytes):
    """A reduce request up to its bin data's first byte."""
    return (b"\x94" + pack(0) + pack(msgid) + pack("reduce") + b"\x91\x83" + pack("op") + pack(op) +
            pack("dtype") + pack(dtype) + pack("data") + b"\xc6" + struct.pack(">I", nbytes))
