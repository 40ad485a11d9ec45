"""Idle kernel TCP connections for the scale case (cases_hardening.py):
`kernel_idle_clients.py SRC DST PORT COUNT [IN_FLIGHT]` opens COUNT
connections from address SRC to DST:PORT (at most IN_FLIGHT, default
1,000, connecting at once), sends one byte
on each and reads its echo, and holds them until its standard input
closes.  It prints `at N` every two seconds while it works (N connections
up so far), then `up N` once every connection has echoed, or
`failed N: WHY` (and exits 1) at the first error, naming the call, the
errno and the connections up so far, or when its input closes first.

Each socket sets IP_BIND_ADDRESS_NO_PORT before its bind to SRC, so the
kernel picks the port at connect() from the whole four-tuple (one
destination's range of ports per source address), not at bind() from the
ports free on SRC alone: binding port 0 first ran out of ports (the
EADDRNOTAVAIL at 12 clients x 19,000).  The namespace's
net.ipv4.ip_local_port_range sets how many a source address has.

The echo makes "up" mean established on both ends: when ustack's SYN queue
is full it answers with a SYN cookie and keeps nothing, so a handshake
whose last ACK is lost (a full receive ring under the burst) is
established only on the client until the client's first data segment,
which carries the cookie back; an idle connection would never send one."""

import errno
import os
import resource
import select
import socket
import sys
import time

IP_BIND_ADDRESS_NO_PORT = 24
# Connections that make no progress for this long are a failure: longer
# than the kernel's own backoff (a SYN sent again after 64 s, an
# unanswered byte after up to 120 s), which a burst that fills ustack's
# receive ring meets.
CONNECT_STALL_SECONDS = 240


def fail(up, why):
    print(f"failed {up}: {why}", flush=True)
    return 1


def main():
    src, dst, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    in_flight = int(sys.argv[5]) if len(sys.argv) > 5 else 1000
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 100
    if hard != resource.RLIM_INFINITY and want > hard:
        return fail(0, f"{count} connections need {want} open files; this process may have {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
    up, connecting, echoing = [], {}, set()
    poll = select.poll()
    # A closed input ends the client while it still connects, too (the
    # runner stopped: a timeout, or too little memory left).
    poll.register(sys.stdin.fileno(), select.POLLIN)
    opened = 0
    last_progress = time.monotonic()
    last_event = time.monotonic()
    while len(up) < count:
        while opened < count and len(connecting) < in_flight:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            try:
                s.bind((src, 0))
            except OSError as e:
                return fail(len(up), f"bind({src}) of connection {opened + 1}: {errno.errorcode.get(e.errno, e.errno)}")
            rc = s.connect_ex((dst, port))
            if rc not in (0, errno.EINPROGRESS):
                return fail(len(up), f"connect({dst}:{port}) of connection {opened + 1} from {src}: "
                                     f"{errno.errorcode.get(rc, rc)} (ports of the source address used up?)")
            connecting[s.fileno()] = s
            poll.register(s, select.POLLOUT)
            opened += 1
        events = poll.poll(1000)
        now = time.monotonic()
        if now - last_progress >= 2:
            print(f"at {len(up)}", flush=True)
            last_progress = now
        if events:
            last_event = now
        elif now - last_event > CONNECT_STALL_SECONDS:
            return fail(len(up), f"{len(connecting)} connections made no progress for {CONNECT_STALL_SECONDS} s")
        for fd, _ in events:
            if fd == sys.stdin.fileno():
                return fail(len(up), "stopped: the input closed before every connection was up")
            s = connecting[fd]
            if fd in echoing:
                try:
                    got = s.recv(1)
                except BlockingIOError:
                    continue
                except OSError as e:
                    return fail(len(up), f"recv of the echo: {errno.errorcode.get(e.errno, e.errno)}")
                if got != b"x":
                    return fail(len(up), f"the echo was {got!r}, not b'x' (closed by the peer?)")
                del connecting[fd]
                echoing.discard(fd)
                poll.unregister(fd)
                up.append(s)
                continue
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                return fail(len(up), f"connect({dst}:{port}) from {src}: {errno.errorcode.get(err, err)}")
            try:
                sent = s.send(b"x")
            except OSError as e:
                return fail(len(up), f"send: {errno.errorcode.get(e.errno, e.errno)}")
            if sent != 1:
                return fail(len(up), "send took nothing")
            echoing.add(fd)
            poll.modify(fd, select.POLLIN)
    print(f"up {len(up)}", flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    # The parent reads our lines; a closed pipe ends us quietly.
    try:
        sys.exit(main())
    except BrokenPipeError:
        os._exit(1)
