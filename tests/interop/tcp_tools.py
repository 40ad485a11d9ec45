"""Client-side tools of the TCP tests: many echo connections at once, raw
HTTP exchanges, the /bytes/N pattern, wrk's report, a kernel HTTP server."""

import contextlib
import hashlib
import re
import selectors
import socket
import subprocess
import time

import harness as h
from harness import TestFailure, check


# --------------------------------------------------------------------------
# The /bytes/N pattern (crates/apps/src/http/body.rs): 16-byte records, the
# record at offset o is o in decimal on 15 digits and a newline.

def pattern(offset, n):
    """n bytes of the pattern from `offset` (a multiple of 16)."""
    assert offset % 16 == 0
    return b"".join(b"%015d\n" % o for o in range(offset, offset + n + 15, 16))[:n]


def check_pattern_file(path, n, chunk=1 << 20):
    """None when the file is exactly the first n bytes of the pattern, else
    what is wrong (size, or the first offset that differs)."""
    with open(path, "rb") as f:
        off = 0
        while True:
            got = f.read(chunk)
            if not got:
                break
            want = pattern(off, min(chunk, max(0, n - off)))
            if got != want:
                for i, (a, b) in enumerate(zip(got, want)):
                    if a != b:
                        return f"differs at offset {off + i}"
                return f"{off + len(got)} bytes, expected {n}"
            off += len(got)
    if off != n:
        return f"{off} bytes, expected {n}"
    return None


def sha256_file(path):
    d = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            d.update(block)
    return d.hexdigest()


# --------------------------------------------------------------------------
# Echo

def echo_many(ns, dest, payloads, timeout=60.0):
    """One connection per payload to dest, all at once: each sends its
    payload, shuts its write side (SHUT_WR) and reads until EOF.  Returns
    what each received."""
    sel = selectors.DefaultSelector()
    conns = []
    try:
        for i, p in enumerate(payloads):
            family = socket.AF_INET6 if ":" in dest[0] else socket.AF_INET
            s = h.netns_socket(ns, family, socket.SOCK_STREAM)
            s.setblocking(False)
            st = {"i": i, "sock": s, "data": memoryview(p), "sent": 0, "got": bytearray(), "shut": False}
            conns.append(st)
            err = s.connect_ex(dest)
            check(err in (0, 115), f"connection {i}: connect: {err}")  # EINPROGRESS
            sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, st)
        left = len(conns)
        deadline = time.monotonic() + timeout
        while left:
            if time.monotonic() > deadline:
                state = [(c["sent"], len(c["got"])) for c in conns]
                raise TestFailure(f"echo not done within {timeout}s: (sent, received) per connection {state}")
            for key, ev in sel.select(timeout=1.0):
                st = key.data
                s = st["sock"]
                if ev & selectors.EVENT_WRITE and not st["shut"]:
                    try:
                        n = s.send(st["data"][st["sent"]:st["sent"] + 262144])
                    except BlockingIOError:
                        n = 0
                    except OSError as e:
                        raise TestFailure(f"connection {st['i']}: send after {st['sent']} bytes: {e}") from e
                    st["sent"] += n
                    if st["sent"] == len(st["data"]):
                        s.shutdown(socket.SHUT_WR)
                        st["shut"] = True
                        sel.modify(s, selectors.EVENT_READ, st)
                if ev & selectors.EVENT_READ:
                    try:
                        b = s.recv(262144)
                    except BlockingIOError:
                        continue
                    except OSError as e:
                        raise TestFailure(f"connection {st['i']}: recv after {len(st['got'])} bytes "
                                          f"({st['sent']} sent): {e}") from e
                    if b:
                        st["got"] += b
                    else:
                        check(st["shut"], f"connection {st['i']}: EOF after {len(st['got'])} bytes, "
                                          f"before the client finished sending ({st['sent']} sent)")
                        sel.unregister(s)
                        s.close()
                        left -= 1
        return [bytes(c["got"]) for c in conns]
    finally:
        for c in conns:
            with contextlib.suppress(OSError):
                c["sock"].close()
        sel.close()


# --------------------------------------------------------------------------
# Raw HTTP

def http_exchange(ns, dest, raw, head_requests=(), timeout=5.0):
    """Sends `raw` (one or several requests) at once, reads every response
    until the server closes; `head_requests` are the indexes of HEAD
    requests (their responses have no body).  Returns (responses, eof)."""
    s = h.netns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(dest)
        s.sendall(raw)
        s.settimeout(timeout)
        buf = b""
        out = []
        eof = False
        while True:
            while b"\r\n\r\n" not in buf:
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    return out, False
                if not b:
                    check(buf == b"", f"a partial response at EOF: {buf[:200]!r}")
                    return out, True
                buf += b
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            m = re.fullmatch(r"HTTP/1\.1 (\d{3}) (.*)", lines[0])
            check(m, f"bad status line {lines[0]!r}")
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            check("content-length" in headers, f"no Content-Length in {lines}")
            n = 0 if len(out) in head_requests else int(headers["content-length"])
            while len(buf) < n:
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    raise TestFailure(f"response {len(out)}: body cut at {len(buf)} of {n} bytes") from None
                check(b, f"response {len(out)}: EOF inside the body ({len(buf)} of {n} bytes)")
                buf += b
            out.append((int(m.group(1)), headers, buf[:n]))
            buf = buf[n:]
    finally:
        s.close()


# --------------------------------------------------------------------------
# wrk

def run_wrk(ns, url, connections=200, seconds=5, threads=2, extra=(), script_args=()):
    """Runs wrk (`script_args`: the arguments of a script given in `extra`
    with -s, put after the URL); returns (report text, {requests, rps,
    socket_errors, non_2xx})."""
    after = ("--", *script_args) if script_args else ()
    p = h.nsx(ns, "wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", *extra, url, *after,
              timeout=seconds + 30, check_rc=False)
    out = p.stdout + p.stderr
    check(p.returncode == 0, f"wrk failed (rc={p.returncode}):\n{out}")
    m = re.search(r"(\d+) requests in", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    check(m and rps, f"cannot read wrk's report:\n{out}")
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return out, {
        "requests": int(m.group(1)),
        "rps": float(rps.group(1)),
        "socket_errors": sum(int(x) for x in errs.groups()) if errs else 0,
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
    }


# --------------------------------------------------------------------------
# A kernel HTTP server

def kernel_http_server(ns, addr, port, directory, workdir):
    """python3 -m http.server in namespace ns, serving `directory`; stopped
    at cleanup.  Returns once it accepts connections."""
    log = open(f"{workdir}/http-server-{port}.log", "wb")
    p = subprocess.Popen(
        ["ip", "netns", "exec", ns, "/usr/bin/python3", "-m", "http.server", "--bind", addr,
         "--directory", directory, str(port)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )

    def stop():
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(3)
        log.close()

    h.on_cleanup(f"http.server pid {p.pid}", stop)
    deadline = time.monotonic() + 10
    while True:
        s = h.netns_socket(ns, socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.settimeout(0.5)
            if s.connect_ex((addr, port)) == 0:
                return p
        finally:
            s.close()
        check(p.poll() is None, f"python3 -m http.server exited (rc={p.returncode})")
        check(time.monotonic() < deadline, "python3 -m http.server did not listen within 10 s")
        time.sleep(0.05)
