"""The protocol core (gpured._protocol) on its own, with no daemon and no
socket: the reply decoder fed in pieces, the dispatch of replies to the
requests in flight, error mapping, msgids, the end of a connection, and
the bytes of each method's request."""

import concurrent.futures
import gc
import os
import random
from collections import namedtuple

import msgpack
import numpy as np
import pytest

import gpured
from gpured import _protocol, _wire
from gpured._protocol import Broken, MalformedReply, Protocol, ReplyDecoder, ReplyTooLarge


def reply(msgid, result=None, error=None):
    return msgpack.packb([1, msgid, error, result])


REPLIES = [(1, None, "pong"), (2, None, {"value": 45, "count": 10}),
           (3, {"code": "empty", "message": "no elements"}, None),
           (4, None, {"count": 3, "values": bytes(range(24))}),
           (0xFFFFFFFF, None, [1, 2.5, None, True])]
STREAM = b"".join(reply(m, r, e) for m, e, r in REPLIES)


def decode(pieces, decoder=None):
    d = decoder or ReplyDecoder()
    got = []
    for p in pieces:
        got.extend(d.feed(p))
    return got


# ---- the decoder ----

def test_decoder_byte_by_byte():
    got = decode(STREAM[i:i + 1] for i in range(len(STREAM)))
    assert got == REPLIES


def test_decoder_split_frames():
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randint(1, 12)))
        pieces = [STREAM[a:b] for a, b in zip([0] + cuts, cuts + [len(STREAM)])]
        assert decode(pieces) == REPLIES
    assert decode([STREAM]) == REPLIES             # all in one read
    assert decode([STREAM, b"", STREAM]) == REPLIES * 2


def test_decoder_yields_only_whole_replies():
    d = ReplyDecoder()
    one = reply(9, "x")
    assert d.feed(one[:-1]) == []
    assert d.feed(one[-1:] + one[:2]) == [(9, None, "x")]
    assert d.feed(one[2:]) == [(9, None, "x")]
    assert d.feed(one + one) == [(9, None, "x")] * 2


@pytest.mark.parametrize("bad", [
    msgpack.packb([0, 1, "ping", []]),          # a request, not a response
    msgpack.packb([1, 1, None]),                # three fields
    msgpack.packb({"a": 1}),
    msgpack.packb(7),
    msgpack.packb([1, "1", None, None]),        # a msgid that is no number
    b"\xc1",                                    # never used in msgpack
])
def test_decoder_refuses_what_is_no_response(bad):
    d = ReplyDecoder()
    with pytest.raises(MalformedReply) as e:
        d.feed(reply(1, "ok") + bad)
    assert e.value.responses == [(1, None, "ok")]       # what came before still counts


def test_decoder_limit():
    big = reply(5, b"x" * 2000)
    d = ReplyDecoder(limit=1000)
    with pytest.raises(MalformedReply, match="larger than 1000 bytes"):
        d.feed(big)
    # Not yet whole, already past the limit: known before the rest comes.
    d = ReplyDecoder(limit=1000)
    with pytest.raises(ReplyTooLarge, match="larger than 1000 bytes"):
        d.feed(reply(4, "ok") + big[:1500])
    # Raised for a cumsum's values: it passes.
    d = ReplyDecoder(limit=1000)
    d.expect(4000)
    d.expect(10)                                # never lowered
    assert decode([big[:1500], big[1500:]], d) == [(5, None, b"x" * 2000)]
    assert d.limit == 4000


# ---- dispatch ----

class Fut:
    """A future that notes its outcome: (name, outcome, failed)."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def set_result(self, value):
        self.log.append((self.name, value, False))

    def set_exception(self, exc):
        self.log.append((self.name, exc, True))


class Recording(Protocol):
    """A Protocol whose requests are named: their outcomes go to
    self.settled."""

    def __init__(self, on_unmap):
        super().__init__("/test.sock", RuntimeError, on_unmap)
        self.settled = []

    def request(self, name, tail, conv):
        fut = None if name is None else Fut(name, self.settled)
        return super().request(fut, tail, conv)


def proto(on_unmap=lambda: None):
    return Recording(on_unmap)


def receive(p, data):
    """What p.receive(data) settles: (token, outcome, failed) each."""
    p.receive(data)
    got = list(p.settled)
    del p.settled[:]
    return got


def test_msgids_and_heads():
    p = proto()
    m1, h1 = p.request("a", b"T", None)
    m2, h2 = p.request("b", b"U", None)
    assert (m1, m2) == (1, 2)
    assert h1 == b"\x94\x00\xce\x00\x00\x00\x01T" and h2 == b"\x94\x00\xce\x00\x00\x00\x02U"
    # Wraps past 2**32 - 1 to 1, skipping those still in flight.
    p.msgid = 0xFFFFFFFE
    assert p.request("c", b"", None)[0] == 0xFFFFFFFF
    assert p.request("d", b"", None)[0] == 3
    p.forget(m1)
    p.msgid = 0xFFFFFFFF
    assert p.request("e", b"", None)[0] == 1
    assert sorted(p.pending) == [1, 2, 3, 0xFFFFFFFF]


def test_dispatch_by_msgid():
    p = proto()
    ids = {tok: p.request(tok, b"", conv)[0]
           for tok, conv in (("ping", _protocol.ident), ("sum", _protocol.result_conv(
               "sum", "i64", False, False)), ("full", _protocol.result_conv("sum", "i64", True,
                                                                              False)))}
    data = (reply(ids["full"], {"value": 6, "count": 3}) + reply(12345, "nobody's") +
            reply(ids["ping"], "pong") + reply(ids["sum"], {"value": 45, "count": 10}))
    got = [ev for i in range(len(data)) for ev in receive(p, data[i:i + 1])]
    assert got == [("full", gpured.Result(6, 3), False), ("ping", "pong", False),
                   ("sum", 45, False)]
    assert p.pending == {}


def test_unknown_msgid_is_dropped():
    p = proto()
    m, _ = p.request("t", b"", _protocol.ident)
    assert receive(p, reply(m + 1, "stray") + reply(m, "mine")) == [("t", "mine", False)]
    # an error for no request: dropped too
    assert receive(p, reply(99, error={"code": "invalid_params", "message": "?"})) == []
    # the reply to an unmap (no token) likewise
    p.regions.doom([5])
    (head,) = p.unmap_requests()
    assert msgpack.unpackb(head, raw=False) == [0, m + 1, "unmap", [{"region": 5}]]
    assert receive(p, reply(m + 1, None)) == [] and p.pending == {}


ERRORS = [("invalid_request", gpured.InvalidRequest), ("unknown_method", gpured.UnknownMethod),
          ("invalid_params", gpured.InvalidParams), ("too_large", gpured.TooLarge),
          ("empty", gpured.Empty), ("busy", gpured.Busy), ("internal", gpured.Internal)]


@pytest.mark.parametrize("code,cls", ERRORS)
def test_error_mapping(code, cls):
    p = proto()
    m, _ = p.request("t", b"", _protocol.ident)
    ((tok, exc, failed),) = receive(p, reply(m, error={"code": code, "message": "why " + code}))
    assert tok == "t" and failed and type(exc) is cls
    assert exc.code == code and exc.message == "why " + code
    # busy and invalid_request: the daemon closes, and the end says why
    closes = code in ("busy", "invalid_request")
    assert p.closing == ((cls, "why " + code) if closes else None)
    with pytest.raises(Broken) as e:
        receive(p, b"")
    assert e.value.args == ((cls, "why " + code) if closes else
                            (gpured.ConnectionError, "connection closed by the daemon"))


def test_odd_errors_and_results():
    p = proto()
    a, _ = p.request("a", b"", _protocol.ident)
    b, _ = p.request("b", b"", _protocol.ident)
    c, _ = p.request("c", b"", _protocol.as_map)
    got = receive(p, reply(a, error={"code": "brand_new", "message": "m"}) +
                  reply(b, error="just a string") + reply(c, [1, 2]))
    assert [(t, f) for t, _, f in got] == [("a", True), ("b", True), ("c", True)]
    assert type(got[0][1]) is gpured.Error and got[0][1].code == "brand_new"
    assert type(got[1][1]) is gpured.Internal and "malformed error" in got[1][1].message
    # a result that does not convert fails its request, not the connection
    assert type(got[2][1]) is gpured.Error and got[2][1].code == "internal"
    assert p.dead is None


def test_cancelled_future():
    p = Protocol("/test.sock", concurrent.futures.InvalidStateError, lambda: None)
    a, b = concurrent.futures.Future(), concurrent.futures.Future()
    ma, _ = p.request(a, b"", _protocol.ident)
    mb, _ = p.request(b, b"", _protocol.ident)
    a.cancel()
    p.receive(reply(ma, "dropped") + reply(mb, "kept"))
    assert a.cancelled() and b.result() == "kept" and p.pending == {}


def test_broken_streams():
    p = proto()
    m, _ = p.request("t", b"", _protocol.ident)
    with pytest.raises(Broken) as e:
        receive(p, b"\xc1")
    assert e.value.args[0] is gpured.ConnectionError
    assert e.value.args[1].startswith("malformed response from /test.sock: ")
    p = proto()
    p.replies.limit = 100
    with pytest.raises(Broken) as e:
        receive(p, reply(1, b"x" * 200)[:150])
    assert e.value.args == (gpured.ConnectionError,
                            "a reply from /test.sock larger than 100 bytes")
    # a msgid that is no number; the replies before it still count
    p = proto()
    m, _ = p.request("t", b"", _protocol.ident)
    with pytest.raises(Broken, match="malformed"):
        receive(p, reply(m, "first") + msgpack.packb([1, {"x": 1}, None, None]))
    assert p.settled == [("t", "first", False)]
    # a result whose converter fails other than as a bad result
    p = proto()

    def conv(res):
        raise KeyError(res)
    a, _ = p.request("a", b"", conv)
    b, _ = p.request("b", b"", _protocol.ident)
    with pytest.raises(Broken, match="malformed"):
        receive(p, reply(a, "x") + reply(b, "y"))
    assert p.settled == [] and list(p.pending) == [b]        # failed with the connection


def test_fail():
    p = proto()
    tokens = ["a", "b", "c"]
    for t in tokens:
        p.request(t, b"", None)
    p.regions.doom([1])
    p.regions.doom([2])
    p.fail(gpured.Timeout, "no answer")
    assert sorted(t for t, _, _ in p.settled) == tokens
    assert all(type(e) is gpured.Timeout and e.message == "no answer" and failed
               for _, e, failed in p.settled)
    assert p.pending == {} and p.regions.take_doomed() == ()
    # the first reason wins
    del p.settled[:]
    p.fail(gpured.ConnectionError, "closed")
    assert p.settled == []
    with pytest.raises(gpured.Timeout, match="no answer"):
        p.request("d", b"", None)
    with pytest.raises(gpured.Timeout):
        p.raise_dead()


def test_lost():
    p = proto()
    e = BrokenPipeError(32, "Broken pipe")
    assert p.lost(e) == (gpured.ConnectionError, "connection to /test.sock lost: Broken pipe")
    p.error({"code": "busy", "message": "at the limit"})
    assert p.lost(e) == (gpured.Busy, "at the limit")


def test_sent():
    a, b, c = b"abc", b"defg", b"h"
    assert [bytes(x) for x in _protocol.sent([a, b, c], 0)] == [a, b, c]
    assert [bytes(x) for x in _protocol.sent([a, b, c], 3)] == [b, c]
    assert [bytes(x) for x in _protocol.sent([a, b, c], 5)] == [b"fg", c]
    assert [bytes(x) for x in _protocol.sent([a, b, c], 7)] == [c]


# ---- requests ----

# a Call's fields by name
Call = namedtuple("Call", "tail conv fds data")


def frame(p, call):
    """The whole request a Call makes, as msgpack reads it."""
    call = Call(*call)
    m, head = p.request(None, call.tail, call.conv)
    p.forget(m)
    data = call.data
    data = b"" if data is None else (bytes(data) if not isinstance(data, list) else
                                     b"".join(bytes(d) for d in data))
    return msgpack.unpackb(head + data, raw=False)


def submit(p, op, x, full=False, allow_copy=False, partial=False, ddof=None, offsets=None,
           out=None):
    call = p.submit(op, x, full, allow_copy, partial, ddof, offsets, out)
    if type(call) is _protocol.Steps:           # a cumsum's
        assert call.call is None, "a host array needs no other request first"
        call = call.value
    return Call(*call)


@pytest.mark.parametrize("n", [0, 5, 4096, 4097, 100_000])
def test_reduce_requests(n):
    p = proto()
    x = np.arange(n, dtype=np.float32)
    call = submit(p, "sum", x)
    assert (call.data is None) == (x.nbytes <= _wire.SMALL_COPY_BYTES)
    assert frame(p, call) == [0, 1, "reduce", [{"op": "sum", "dtype": "f32",
                                                "data": x.tobytes()}]]
    assert call.conv({"value": 1.5, "count": n}) == 1.5


def test_request_params():
    p = proto()
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    d = x.tobytes()
    cases = [
        (dict(op="max", x=x.astype(">i8")), {"op": "max", "dtype": "i64",
                                             "data": x.astype("<i8").tobytes()}),
        (dict(op="sum", x=x, partial=True), {"partial": True, "op": "sum", "dtype": "i32",
                                             "data": d}),
        (dict(op="moments", x=x, ddof=1), {"op": "moments", "dtype": "i32", "ddof": 1,
                                           "data": d}),
        (dict(op="argmin", x=np.asfortranarray(x)), {"op": "argmin", "dtype": "i32",
                                                     "data": np.asfortranarray(x).tobytes("A")}),
        (dict(op="sum", x=x, offsets=[0, 2, 6]), {"op": "sum", "dtype": "i32",
                                                  "offsets": np.array([0, 2, 6], "<u8").tobytes(),
                                                  "data": d}),
        (dict(op="cumsum", x=x), {"op": "cumsum", "dtype": "i32", "data": d}),
    ]
    for kw, params in cases:
        call = submit(p, **kw)
        got = frame(p, call)
        assert got[2:] == ["reduce", [params]], kw
        assert list(got[3][0]) == list(params), kw         # the keys' order too


def test_result_conversions():
    p = proto()
    x = np.arange(6, dtype=np.int64)
    res = {"value": 0, "index": 0, "count": 6}
    assert submit(p, "argmin", x).conv(res) == gpured.ArgResult(0, 0, 6)
    assert submit(p, "sum", x, full=True).conv({"value": 15, "count": 6}) == gpured.Result(15, 6)
    m = {"count": 6, "sum": 15, "min": 0, "max": 5, "mean": 2.5, "var": 3.5}
    assert submit(p, "moments", x, ddof=1).conv(m) == gpured.Moments(6, 15, 0, 5, 2.5, 3.5)
    part = submit(p, "sum", x, partial=True).conv({"value": 15, "count": 6})
    assert isinstance(part, gpured.Partial) and part.value == 15
    seg = submit(p, "max", x, offsets=[0, 4, 6]).conv(
        {"count": 6, "segments": 2, "values": np.array([3, 5], "<i8").tobytes()})
    assert seg.tolist() == [3, 5]
    cs = submit(p, "cumsum", x).conv({"count": 6, "values": np.cumsum(x).tobytes()})
    assert cs.tolist() == [0, 1, 3, 6, 10, 15]
    with pytest.raises(ValueError, match="malformed reduce result"):
        submit(p, "sum", x).conv({"count": 6})


def test_bad_options_raise_before_anything():
    p = proto()
    x = np.ones(3)
    for kw, exc in [(dict(op="mean"), ValueError), (dict(op="sum", ddof=1), ValueError),
                    (dict(op="argmax", partial=True), ValueError),
                    (dict(op="sum", partial=True, offsets=[0, 3]), ValueError),
                    (dict(op="cumsum", full=True), ValueError),
                    (dict(op="max", out=np.ones(3)), ValueError),
                    (dict(op="sum", offsets=[0, 2]), ValueError)]:
        with pytest.raises(exc):
            submit(p, x=x, **kw)
    with pytest.raises(TypeError):
        submit(p, "sum", np.ones(3, np.complex64))
    assert p.pending == {} and p.msgid == 0


def test_methods():
    p = proto()
    assert frame(p, _protocol.METHODS["ping"]) == [0, 1, "ping", []]
    assert frame(p, _protocol.METHODS["stats"])[2:] == ["stats", []]
    assert frame(p, _protocol.method_call("reduce", ({"op": "sum"},)))[2:] == \
        ["reduce", [{"op": "sum"}]]
    long_name = "m" * 40
    assert frame(p, _protocol.method_call(long_name, (1, 2)))[2:] == [long_name, [1, 2]]
    with pytest.raises(ValueError):
        Call(*_protocol.METHODS["info"]).conv("not a map")


# ---- methods with steps: regions ----

def test_empty_and_region_requests():
    unmapped = []
    p = proto(lambda: unmapped.append(1))
    s = p.empty((4, 5), np.float64, True)
    call = Call(*s.call)
    assert len(call.fds) == 1 and os.fstat(call.fds[0]).st_size == 160
    assert frame(p, call)[2:] == ["map", [{"bytes": 160, "writable": True}]]
    s.send({"region": 9})
    fd = call.fds[0]
    with pytest.raises(OSError):
        os.fstat(fd)                            # closed once answered
    a = s.value
    assert a.shape == (4, 5) and a.dtype == np.float64 and s.call is None
    # a slice of it goes as region, offset, count
    call = submit(p, "sum", a[1:3])
    assert call.data is None
    assert frame(p, call)[3] == [{"op": "sum", "dtype": "f64", "region": 9, "offset": 40,
                                  "count": 10}]
    # a cumsum of it into itself (writable)
    call = submit(p, "cumsum", a, out=a)
    assert frame(p, call)[3] == [{"op": "cumsum", "dtype": "f64", "region": 9, "offset": 0,
                                  "count": 20, "out_region": 9, "out_offset": 0}]
    del a, call, s
    gc.collect()
    assert unmapped == [1]
    (head,) = p.unmap_requests()
    assert msgpack.unpackb(head, raw=False)[2:] == ["unmap", [{"region": 9}]]


def test_cumsum_of_a_region_maps_one_for_its_values():
    p = proto()
    s = p.empty(8, np.int32, False)
    s.send({"region": 1})
    a = s.value
    s = p.submit("cumsum", a, False, False, False, None, None, None)
    assert frame(p, s.call)[2:] == ["map", [{"bytes": 64, "writable": True}]]
    s.send({"region": 2})
    assert frame(p, s.value)[3] == [{"op": "cumsum", "dtype": "i32", "region": 1, "offset": 0,
                                     "count": 8, "out_region": 2, "out_offset": 0}]


def test_steps_take_a_refusal():
    p = proto()
    s = p.empty(100, np.int64, False)
    fd = s.call[2][0]
    with pytest.raises(gpured.TooLarge):
        s.throw(gpured.TooLarge("too many regions"))
    with pytest.raises(OSError):
        os.fstat(fd)
    assert len(p.regions) == 0
    s = p.empty(100, np.int64, False)
    with pytest.raises(gpured.InvalidParams, match="map answered"):
        s.send({"no": "region"})
