#!/usr/bin/python3
"""testbed STAND-IN for kube-apiserver: listens on TCP 6443 and answers every connection with one
line "testbed-apiserver HOSTNAME" (so a test can see which master a load balancer reached), then
closes it. Argument: the PID file to write once listening."""
import os, socket, sys

pidfile = sys.argv[1]
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 6443))
srv.listen(64)
with open(pidfile + ".tmp", "w") as f:
    f.write(f"{os.getpid()}\n")
os.replace(pidfile + ".tmp", pidfile)
line = f"testbed-apiserver {socket.gethostname()}\n".encode()
while True:
    conn, _ = srv.accept()
    try:
        conn.sendall(line)
    except OSError:
        pass
    finally:
        conn.close()
