"""The daemon driven by stock msgpack-RPC clients, not by gpured's own:
the session layer of Neovim's Python client (pynvim.msgpack_rpc, Debian's
python3-pynvim), and aio-msgpack-rpc (pure Python, from PyPI). Each sums a
few float64 given as a bin and as an array, sends notifications that get
no reply, gets an error reply for an unknown method, and asks for info.

Both kinds of method name are used: a str, and a bin, which is what these
clients send for a name given as bytes (pynvim's session opens every
connection with such a notification, nvim_set_client_info)."""

import asyncio
import math
import struct

import msgpack
import pytest

from conftest import BACKEND

VALUES = [0.1, 0.2, 0.3, 1e16, -1e16, 2.5e-300, -7.25]
# The daemon's float sum is the exact sum rounded once, as math.fsum's is.
EXPECT = math.fsum(VALUES)


class PynvimClient:
    """pynvim's msgpack-RPC session over the daemon's Unix socket."""

    def __init__(self, path):
        rpc = pytest.importorskip(
            "pynvim.msgpack_rpc",
            reason="pynvim's msgpack-RPC session layer is not installed (Debian: python3-pynvim)")
        self.error = rpc.ErrorResponse
        self.session = rpc.socket_session(path)
        # What pynvim's Nvim class does with an error reply: wrap it.
        self.session.error_wrapper = lambda err: rpc.ErrorResponse(err)

    def request(self, method, *args):
        return self.session.request(method, *args)

    def notify(self, method, *args):
        self.session.request(method, *args, async_=True)

    def error_of(self, exc):
        return exc.args[0]

    def close(self):
        self.session.close()


class AioClient:
    """aio-msgpack-rpc's Client on an asyncio Unix-socket stream."""

    def __init__(self, path):
        mod = pytest.importorskip(
            "aio_msgpack_rpc",
            reason="aio-msgpack-rpc is not installed (PyPI: aio-msgpack-rpc, pure Python;"
                   " quickstart.sh test puts it in $GPURED_TEST_PYDEPS)")
        from aio_msgpack_rpc.error import RPCResponseError
        self.error = RPCResponseError
        self.loop = asyncio.new_event_loop()
        reader, writer = self.loop.run_until_complete(asyncio.open_unix_connection(path))
        self.writer = writer
        self.client = mod.Client(reader, writer, loop=self.loop, response_timeout=30)

    def request(self, method, *args):
        return self.loop.run_until_complete(self.client.call(method, *args))

    def notify(self, method, *args):
        self.loop.run_until_complete(self.client.notify(method, *args))

    def error_of(self, exc):
        return exc.args[0]

    def close(self):
        self.client.close()
        self.loop.run_until_complete(self.writer.wait_closed())
        self.loop.close()


@pytest.fixture(params=[PynvimClient, AioClient], ids=["pynvim", "aio-msgpack-rpc"])
def stock(request, daemon):
    c = request.param(daemon.path)
    try:
        yield c
    finally:
        c.close()


def reduce_sum(data):
    return {"op": "sum", "dtype": "f64", "data": data}


@pytest.mark.parametrize("method", ["reduce", b"reduce"], ids=["str", "bin"])
def test_sum_float64_bin_and_array(stock, method):
    packed = struct.pack("<%dd" % len(VALUES), *VALUES)
    r = stock.request(method, reduce_sum(packed))
    assert r == {"value": EXPECT, "count": len(VALUES)}
    r = stock.request(method, reduce_sum(list(VALUES)))
    assert r == {"value": EXPECT, "count": len(VALUES)}
    # An odd count, and none at all.
    r = stock.request(method, reduce_sum(packed[:3 * 8]))
    assert r == {"value": math.fsum(VALUES[:3]), "count": 3}
    assert stock.request(method, reduce_sum([])) == {"value": 0.0, "count": 0}


def test_notifications_get_no_reply(stock):
    s0 = stock.request("stats")
    s1 = stock.request(b"stats")
    packed = struct.pack("<%dd" % len(VALUES), *VALUES)
    notes = [("reduce", reduce_sum(packed)), (b"reduce", reduce_sum(list(VALUES))),
             ("frobnicate", 1), (b"frobnicate",), (b"ping",)]
    for method, *args in notes:
        stock.notify(method, *args)
    s2 = stock.request("stats")
    # The daemon read the notifications before this request...
    sent = sum(len(msgpack.packb([2, m, list(a)], use_bin_type=True)) for m, *a in notes)
    assert s2["bytes_in"] - s1["bytes_in"] > sent
    # ...and answered nothing more than the stats requests themselves:
    # no reply, no error, nothing reduced.
    assert s2["requests"] - s1["requests"] == s1["requests"] - s0["requests"]
    assert s2["errors"] == s1["errors"] == s0["errors"]
    assert s2["elements"] == s1["elements"]
    # The only reply on the connection is the next request's.
    assert stock.request(b"ping") == "pong"


@pytest.mark.parametrize("method", ["frobnicate", b"frobnicate"], ids=["str", "bin"])
def test_unknown_method_is_an_error_reply(stock, method):
    with pytest.raises(stock.error) as e:
        stock.request(method)
    err = stock.error_of(e.value)
    assert err["code"] == "unknown_method"
    assert err["message"] == "unknown method 'frobnicate'"
    # The connection stays open.
    assert stock.request("ping") == "pong"
    assert stock.request(b"ping") == "pong"


@pytest.mark.parametrize("method", ["info", b"info"], ids=["str", "bin"])
def test_info(stock, method):
    info = stock.request(method)
    assert info["backend"] == BACKEND
    assert isinstance(info["version"], str) and info["version"]
    assert info == stock.request("info" if isinstance(method, bytes) else b"info")
