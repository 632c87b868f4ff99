#!/usr/bin/env python3
"""packaging/gpured.conf, the file the packages install as
/etc/gpured/gpured.conf, is one the daemon accepts: as shipped (every line
commented out) and with every setting uncommented, so no key in it is
misspelt and no value malformed. The command line wins over the file, so
--socket and --backend keep the daemon on a private socket and the CPU.

usage: example-config.py GPURED GPURED_CONF
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

# No __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grtest  # noqa: E402
from grtest import fail  # noqa: E402


def run_with(gpured, conf, tmp, name):
    base = os.path.join(tmp, re.sub(r"\W+", "-", name).strip("-"))
    sock = base + ".sock"
    log_path = base + ".log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([gpured, "--config", conf, "--backend", "cpu", "--socket", sock],
                                stdout=log, stderr=subprocess.STDOUT, env=grtest.clean_env(tmp))
    try:
        err = grtest.wait_answering(sock, proc)
        if err:
            fail("%s: %s\n--- daemon log:\n%s" % (name, err, grtest.tail(log_path)))
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=15)
        if rc != 0:
            fail("%s: exit status %d after SIGTERM\n--- daemon log:\n%s"
                 % (name, rc, grtest.tail(log_path)))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print("ok: %s accepted" % name)


def main():
    if len(sys.argv) != 3:
        fail("usage: example-config.py GPURED GPURED_CONF")
    gpured, conf = sys.argv[1], sys.argv[2]
    with open(conf) as f:
        text = f.read()
    # "#key = value" lines are settings; "# words" lines are prose.
    setting = re.compile(r"^#([a-z][a-z-]*\s*=.*)$", re.M)
    uncommented = setting.sub(r"\1", text)
    # The metrics example's port may be taken here: a free one instead.
    # A daemon built without libmicrohttpd refuses the key (that is tested
    # with the daemon), so it is left out there.
    if os.environ.get("GPURED_NO_HTTP") == "1":
        uncommented = re.sub(r"^metrics-listen\s*=.*$", "", uncommented, flags=re.M)
    else:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        uncommented = re.sub(r"^(metrics-listen\s*=).*$", r"\1 127.0.0.1:%d" % port, uncommented,
                             flags=re.M)
    keys = setting.findall(text)
    if len(keys) < 5:
        fail("only %d commented-out settings in %s" % (len(keys), conf))
    tmp = tempfile.mkdtemp(prefix="gpured-conf-")
    try:
        full = os.path.join(tmp, "uncommented.conf")
        with open(full, "w") as f:
            f.write(uncommented)
        run_with(gpured, conf, tmp, "as shipped")
        run_with(gpured, full, tmp, "uncommented (%d settings)" % len(keys))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
