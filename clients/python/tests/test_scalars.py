"""A trainer's own figures (``Client.log``) against a real ``patrdb serve``,
and the client's errors on answers that are not the API's JSON."""

import http.server
import os
import random
import signal
import subprocess
import threading
import unittest

from tests import test_client as served
from patrdb_client import BadRequest, BadResponse, Client, ServerError


def setUpModule():
    served.setUpModule()


def tearDownModule():
    served.tearDownModule()


class LogTest(served.ServedTest):
    def test_log_merges_a_steps_figures(self):
        c = self.client
        first = c.log("r1", 1, {"loss": 2.5, "kl": 0.01})
        self.assertEqual(first.step, 1)
        self.assertEqual(first.values, {"loss": 2.5, "kl": 0.01})
        merged = c.log("r1", 1, {"loss": 2.0, "lr": 1e-6})
        self.assertEqual(merged.values, {"loss": 2.0, "kl": 0.01, "lr": 1e-6})
        c.log("r1", 4, {"loss": 1})
        page = c.scalars("r1")
        self.assertEqual(page.names, ["kl", "loss", "lr"])
        self.assertEqual([s.step for s in page.steps], [1, 4])
        self.assertEqual([s.step for s in c.scalars("r1", from_step=2).steps], [4])

    def test_bad_figures_are_refused(self):
        seq = self.last_seq()
        with self.assertRaises(ValueError):
            self.client.log("r1", 1, {"loss": float("nan")})  # refused before sending
        with self.assertRaises(BadRequest) as cm:
            self.client.log("r1", 1, {" loss": 1.0})
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("white space", str(cm.exception))
        with self.assertRaises(BadRequest):
            self.client.log("r1", 0, {"loss": 1.0})
        self.assertEqual(self.last_seq(), seq)

    def test_logged_figures_survive_sigkill(self):
        rng = random.Random(7)
        c = Client(self.server.url, retries=30, backoff=0.02)
        acked, kills = {}, 0
        for i in range(40):
            step = 1 + i // 2
            values = {"loss": rng.random(), "entropy": rng.random()} if i % 2 == 0 else {"grad_norm": rng.random()}
            done = threading.Event()
            box = {}

            def write(step=step, values=values, key=f"py-{i}"):
                try:
                    box["r"] = c.log("r1", step, values, client_key=key)
                except Exception as e:  # noqa: BLE001
                    box["e"] = e
                done.set()

            threading.Thread(target=write).start()
            if rng.random() < 0.3:
                self.server.stop(signal.SIGKILL)
                kills += 1
                self.server.start()
            done.wait(60)
            if "e" in box:
                raise box["e"]
            acked.setdefault(step, {}).update(values)
            for k, v in values.items():
                self.assertEqual(box["r"].values[k], v)
        self.server.stop(signal.SIGKILL)
        self.assertGreater(kills, 0)
        out = subprocess.run([served.BIN, "--db", self.db, "check"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.server.start()
        got = {s.step: s.values for s in self.client.scalars("r1").steps}
        self.assertEqual(got, acked)


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every request with HTML, as a proxy or another service on the port would."""

    def do_GET(self):
        status = 502 if "fail" in self.path else 200
        body = b"<html><body>Bad Gateway: upstream gone</body></html>"
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class NotJSONTest(unittest.TestCase):
    def setUp(self):
        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), _Answer)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def tearDown(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def test_errors_name_the_status_and_the_body(self):
        c = Client(self.url, retries=0, check_version=False)
        with self.assertRaises(BadResponse) as cm:
            c.health()
        self.assertEqual(cm.exception.status, 200)
        self.assertIn("HTTP 200", str(cm.exception))
        self.assertIn("Bad Gateway: upstream gone", str(cm.exception))
        with self.assertRaises(ServerError) as cm:
            c.request("GET", "/api/v1/fail")
        self.assertIn("HTTP 502", str(cm.exception))
        self.assertIn("not JSON", str(cm.exception))
        self.assertIn("upstream gone", str(cm.exception))
        with self.assertRaises(BadResponse):  # the version check reads the index
            Client(self.url, retries=0).runs()


if __name__ == "__main__":
    unittest.main()
