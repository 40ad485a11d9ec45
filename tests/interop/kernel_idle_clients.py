"""Idle kernel TCP connections for the scale case (cases_hardening.py):
`kernel_idle_clients.py SRC DST PORT COUNT` opens COUNT connections from
SRC to DST:PORT (at most 1,000 connecting at once), prints `up N` once all
are established (or `failed N` and exits 1), and holds them until its
standard input closes."""

import resource
import select
import socket
import sys


def main():
    src, dst, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    resource.setrlimit(resource.RLIMIT_NOFILE, (count + 100, count + 100))
    up, failed, connecting = [], 0, {}
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
            s = connecting.pop(fd)
            poll.unregister(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                up.append(s)
            else:
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
