"""torchrun whose rendezvous stores listen only where they should: ``python -m memflow.executor.agent ARGS``.

torchrun's TCPStore servers listen on every interface (``*:PORT``) whatever
``--master-addr`` says, and a port picked free beforehand may be taken by
another process before torchrun binds it. This module runs torchrun (same
arguments) in its own process with the creation of server stores patched: a
server store listens on a socket bound to the address it serves
(TCPStore's ``master_listen_fd``):

* one machine (static rendezvous): the launcher binds 127.0.0.1 on port 0,
  keeps the socket and hands it down (``MEMFLOW_STORE_FD``, ``--master-port``
  its port), so nothing else can take the port in between;
* several machines (c10d rendezvous): the rendezvous store binds the
  ``--rdzv-endpoint`` address, and the store torchrun shares with the
  workers binds the node's own address (the one the workers are told).

The workers connect to the agent's store and create none of their own.
"""
from __future__ import annotations

import os
import socket
import sys
from datetime import timedelta
from typing import Any

__all__ = ["listening_socket", "STORE_FD_ENV", "main"]

STORE_FD_ENV = "MEMFLOW_STORE_FD"
_SOCKETS: list[socket.socket] = []  # the stores' sockets, open as long as the stores serve


def listening_socket(host: str, port: int = 0) -> socket.socket:
    """A TCP socket bound to ``host:port`` (port 0: a free one) and listening."""
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    s = socket.socket(family, kind, proto)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
        s.listen(socket.SOMAXCONN)
    except OSError:
        s.close()
        raise
    return s


def _handed_socket() -> socket.socket | None:
    fd = os.environ.pop(STORE_FD_ENV, None)
    return socket.socket(fileno=int(fd)) if fd else None


def _store_factory(tcp_store: Any, handed: socket.socket | None):
    """A stand-in for ``TCPStore``: servers listen on a socket bound to their host; clients as before."""

    def store(host_name: str, port: int, world_size: int | None = None, is_master: bool = False,
              timeout: timedelta = timedelta(seconds=300), *args, **kw):
        if not is_master or kw.get("master_listen_fd") is not None:
            return tcp_store(host_name, port, world_size, is_master, timeout, *args, **kw)
        if handed is not None and handed.getsockname()[1] == port and handed not in _SOCKETS:
            sock = handed
        else:
            try:
                sock = listening_socket(host_name, port)
            except OSError as e:  # as TCPStore would: torchrun's c10d backend then tries as a client
                raise RuntimeError(f"cannot listen on {host_name}:{port}: {e.strerror or e}") from e
        _SOCKETS.append(sock)
        return tcp_store(host_name, sock.getsockname()[1], world_size, True, timeout, *args,
                         master_listen_fd=sock.fileno(), **kw)

    return store


def main(argv: list[str] | None = None) -> None:
    # torch's launcher is imported here, in the agent's process only: the launcher module imports this one
    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend, dynamic_rendezvous, static_tcp_rendezvous
    from torch.distributed.run import main as torchrun

    store = _store_factory(dist.TCPStore, _handed_socket())
    targets = [(static_tcp_rendezvous, "TCPStore"), (c10d_rendezvous_backend, "TCPStore"),
               (dynamic_rendezvous.DynamicRendezvousHandler, "_create_tcp_store_server")]
    missing = [f"{getattr(t, '__name__', t)}.{name}" for t, name in targets if not hasattr(t, name)]
    if missing:
        sys.exit(f"memflow agent: this torch's launcher has no {', '.join(missing)}; cannot bind its stores")
    static_tcp_rendezvous.TCPStore = store
    c10d_rendezvous_backend.TCPStore = store
    dynamic_rendezvous.DynamicRendezvousHandler._create_tcp_store_server = (
        lambda self, addr, port: store(addr, port, is_master=True, multi_tenant=True))
    torchrun(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
