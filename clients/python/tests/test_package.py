"""The client as a package: version, typing marker, the server's API version
check, and keep-alive connections shared safely by threads.

With PATRDB_CLIENT_INSTALLED=1 (the CI step that pip-installs the client into
a fresh venv) the tests require that the installed copy is the one tested.
"""

import http.server
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import threading
import unittest

from . import test_client
from .test_client import Server

import patrdb_client  # noqa: E402  (test_client put the source on sys.path unless installed)
from patrdb_client import Client, IncompatibleServer, NotFound  # noqa: E402

INSTALLED = os.environ.get("PATRDB_CLIENT_INSTALLED") == "1"


def setUpModule():
    test_client.setUpModule()


def tearDownModule():
    test_client.tearDownModule()


class PackageTest(unittest.TestCase):
    def test_version_and_typing_marker(self):
        pkg = os.path.dirname(patrdb_client.__file__)
        self.assertTrue(os.path.isfile(os.path.join(pkg, "py.typed")), pkg)
        self.assertRegex(patrdb_client.__version__, r"^\d+\.\d+\.\d+$")
        try:
            meta = importlib.metadata.version("patrdb-client")
        except importlib.metadata.PackageNotFoundError:
            if INSTALLED:
                raise
            self.skipTest("not installed")
        self.assertEqual(meta, patrdb_client.__version__)
        if INSTALLED:  # the copy under test is the venv's, not the source tree's
            self.assertTrue(os.path.realpath(pkg).startswith(os.path.realpath(sys.prefix)), (pkg, sys.prefix))


def _reply(h, code, body, headers=None):
    """Writes a JSON answer from a fake server's handler h."""
    h.send_response(code)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body)


class _FakeIndex(http.server.BaseHTTPRequestHandler):
    """A server whose index says what the test wants (or is missing)."""
    answer = None  # None: 404 like a server that predates the index

    def do_GET(self):  # noqa: N802
        if self.path == "/api/v1/" and self.answer is not None:
            body, code = json.dumps(self.answer).encode(), 200
        else:
            body, code = b'{"error":"no such endpoint","code":"no_route"}', 404
        _reply(self, code, body)

    def log_message(self, *args):
        pass


class VersionCheckTest(unittest.TestCase):
    def fake(self, answer):
        handler = type("H", (_FakeIndex,), {"answer": answer})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    def test_refuses_servers_it_cannot_use(self):
        for answer, says in ((None, "predates"), ({"api_version": "2.0"}, "2.0"), ({"api_version": "1.0"}, "1.0"),
                             ({"api_version": "v1"}, "v1")):
            c = Client(self.fake(answer), retries=0)
            with self.assertRaises(IncompatibleServer) as cm:
                c.runs()
            self.assertIn(says, str(cm.exception))
            c.close()
        # Turned off, the request goes through (and meets the fake's 404).
        c = Client(self.fake({"api_version": "2.0"}), retries=0, check_version=False)
        with self.assertRaises(NotFound):
            c.runs()
        self.assertEqual(c.api_version, "")


class _FakeChecking(http.server.BaseHTTPRequestHandler):
    """A server still checking the run: 503 "checking" with Retry-After for
    the first ``checking`` requests, then the list of runs."""
    checking = 0
    seen = None  # the count of requests, shared by the handler's instances

    def do_GET(self):  # noqa: N802
        self.seen.append(self.path)
        if len(self.seen) <= self.checking:
            body, code = b'{"error":"run \\"r\\" is being checked","code":"checking"}', 503
        else:
            body, code = b'{"runs":[]}', 200
        _reply(self, code, body, {"Retry-After": "1"} if code == 503 else {})

    def log_message(self, *args):
        pass


class CheckingTest(unittest.TestCase):
    def fake(self, checking):
        seen = []
        handler = type("H", (_FakeChecking,), {"checking": checking, "seen": seen})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        return f"http://127.0.0.1:{srv.server_address[1]}", seen

    def test_waits_out_a_run_check(self):
        # Four "checking" answers outlast retries=1; they are waited out.
        url, seen = self.fake(4)
        c = Client(url, retries=1, check_version=False)
        self.assertEqual(c.runs(), [])
        self.assertEqual(len(seen), 5)

    def test_gives_up_after_check_wait(self):
        url, seen = self.fake(100)
        c = Client(url, retries=0, check_version=False, check_wait=1.5)
        with self.assertRaises(patrdb_client.ServerError) as cm:
            c.runs()
        self.assertEqual(cm.exception.code, "checking")
        self.assertLessEqual(len(seen), 3)


class ServedPackageTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="patrdb-pkg-")
        self.server = Server(os.path.join(self.dir, "patr.db")).start()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.addCleanup(self.server.stop)

    def test_checks_the_real_server(self):
        c = Client(self.server.url)
        self.assertIsNone(c.api_version)
        self.assertEqual(c.runs(), [])
        major, minor = (int(x) for x in c.api_version.split("."))
        self.assertEqual(major, patrdb_client.MIN_API_VERSION[0])
        self.assertGreaterEqual(minor, patrdb_client.MIN_API_VERSION[1])

    def test_keeps_one_connection_per_thread(self):
        c = Client(self.server.url)
        c.create_run("k1", client_key="k1")
        ports = set()
        for _ in range(20):
            c.run("k1")
            ports.add(c._connection().sock.getsockname()[1])
        self.assertEqual(len(ports), 1, "a new connection per request")

        seen, errors = set(), []
        lock = threading.Lock()

        def work():
            try:
                mine = set()
                for _ in range(50):
                    c.run("k1")
                    mine.add(c._connection().sock.getsockname()[1])
                with lock:
                    seen.update(mine)
                    if len(mine) != 1:
                        errors.append(f"one thread used {len(mine)} connections")
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=work) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(seen), 8)

    def test_survives_a_server_restart_between_requests(self):
        c = Client(self.server.url, retries=0)  # the stale connection is retried at once, not as a retry
        c.create_run("k2", client_key="k2")
        self.assertEqual(self.server.stop(), 0)
        self.server.start()
        self.assertEqual(len(c.runs()), 1)


if __name__ == "__main__":
    unittest.main()
