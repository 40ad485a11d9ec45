"""A threaded TCP echo server on port 7 of the address given (the kernel's
side of the outgoing-connection tests): echoes until EOF, then shuts its
write side."""

import socket, socketserver, sys
class H(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            b = self.request.recv(65536)
            if not b:
                break
            self.request.sendall(b)
        self.request.shutdown(socket.SHUT_WR)
class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 1024
S((sys.argv[1], 7), H).serve_forever()
