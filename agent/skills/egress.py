"""A skill script's only way out: the hosts its skill declared, through a guarded proxy.

The script's sandbox has no network at all (its own empty network namespace, loopback
only). When the turn's skills declared ``network`` hosts, the gateway serves a
:class:`~agent.web.proxy.GuardedProxy` on a Unix socket in a private folder, binds that
folder into the sandbox, and starts the script under a small relay (``python3 -I -S``,
nothing of this project) that listens on the sandbox's own loopback and passes each
connection to the socket; ``HTTP_PROXY`` and ``HTTPS_PROXY`` point there. The proxy judges
every request as ``web_fetch`` judges a URL (public addresses, every DNS answer, redirects
are new requests) and refuses every host the skills did not declare. A program that
ignores the proxy variables reaches nothing.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.web.proxy import GuardedProxy
from agent.web.ssrf import Guard

SOCKET = "egress.sock"
MAX_BYTES = 50 * 1024 * 1024  # everything one script run moves, both directions

# Run as `python3 -I -S -c RELAY SOCKET command...` inside the sandbox.
RELAY = r"""
import os, socket, subprocess, sys, threading
path, command = sys.argv[1], sys.argv[2:]
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
proxy = "http://127.0.0.1:%d" % listener.getsockname()[1]
env = dict(os.environ)
for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
    env[name] = proxy
env["NO_PROXY"] = env["no_proxy"] = ""
def pump(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve():
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            continue
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
sys.exit(subprocess.call(command, env=env))
"""


@dataclass(frozen=True, slots=True)
class Egress:
    folder: Path  # bound read-write into the sandbox: it holds the proxy's socket

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` started under the relay (``python3`` from the sandbox's system)."""
        return [
            "/usr/bin/env",
            "python3",
            "-I",
            "-S",
            "-c",
            RELAY,
            str(self.folder / SOCKET),
            *command,
        ]


@contextlib.asynccontextmanager
async def egress(guard: Guard, refusal: Callable[[str], str | None]) -> AsyncIterator[Egress]:
    """A proxy for one script run that reaches only the hosts ``refusal`` lets through."""
    # 0700: the sandbox's user is the gateway's own user mapped, no one else gets in
    folder = Path(tempfile.mkdtemp(prefix="switchboard-egress-"))
    proxy = GuardedProxy(guard.confined(refusal), max_bytes=MAX_BYTES)
    try:
        await proxy.start_unix(str(folder / SOCKET))
        yield Egress(folder)
    finally:
        await proxy.stop()
        shutil.rmtree(folder, ignore_errors=True)
