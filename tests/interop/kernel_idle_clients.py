"""Idle kernel TCP connections for the scale case (cases_hardening.py):
`kernel_idle_clients.py SRC DST PORT COUNT` opens COUNT connections from
SRC to DST:PORT (at most 1,000 connecting at once), sends one byte on each
and reads its echo, prints `up N` once every connection has echoed (or
`failed N` and exits 1), and holds them until its standard input closes.

The echo makes "up" mean established on both ends: when ustack's SYN queue
is full it answers with a SYN cookie and keeps nothing, so a handshake
whose last ACK is lost (a full receive ring under the burst) is
established only on the client until the client's first data segment,
which carries the cookie back; an idle connection would never send one."""

import resource
import select
import socket
import sys


def main():
    src, dst, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    resource.setrlimit(resource.RLIMIT_NOFILE, (count + 100, count + 100))
    up, failed, connecting, echoing = [], 0, {}, set()
    poll = select.poll()
    opened = 0
    while len(up) + failed < count:
        while opened < count and len(connecting) < 1000:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.bind((src, 0))
            s.connect_ex((dst, port))
            connecting[s.fileno()] = s
            poll.register(s, select.POLLOUT)
            opened += 1
        for fd, _ in poll.poll(5000) or [(None, None)]:
            if fd is None:
                print(f"failed {count - len(up)} (none connected for 5 s)", flush=True)
                return 1
            s = connecting[fd]
            if s.fileno() in echoing:
                try:
                    got = s.recv(1)
                except BlockingIOError:
                    continue
                except OSError:
                    got = b""
                del connecting[fd]
                echoing.discard(fd)
                poll.unregister(fd)
                if got == b"x":
                    up.append(s)
                else:
                    failed += 1
                    s.close()
            elif s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 and s.send(b"x") == 1:
                echoing.add(fd)
                poll.modify(fd, select.POLLIN)
            else:
                del connecting[fd]
                poll.unregister(fd)
                failed += 1
                s.close()
    if failed:
        print(f"failed {failed}", flush=True)
        return 1
    print(f"up {len(up)}", flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
