"""A scratch ``patrdb serve`` for the benchmarks: builds the CLI with ``go
build`` unless a binary is given, serves a file in a temporary folder on a
free loopback port, and removes both afterwards."""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from typing import Iterator, Optional

HERE = os.path.dirname(os.path.abspath(__file__))


@contextlib.contextmanager
def served(binary: Optional[str] = None) -> Iterator[str]:
    """Yields the server's base URL."""
    tmp = tempfile.mkdtemp(prefix="patrdb-bench-")
    try:
        if not binary:
            binary = os.path.join(tmp, "patrdb")
            subprocess.run(["go", "build", "-o", binary, "./cmd/patrdb"], cwd=os.path.join(HERE, "..", "..", ".."),
                           check=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        p = subprocess.Popen([binary, "--db", os.path.join(tmp, "b.db"), "serve", "--addr", f"127.0.0.1:{port}"],
                             stdout=subprocess.PIPE, text=True)
        p.stdout.readline()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            p.terminate()
            p.wait()
            p.stdout.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
