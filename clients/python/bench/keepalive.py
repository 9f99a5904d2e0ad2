"""Requests per second of the client over keep-alive connections, against the
same client opening a new connection per request (the anchor, measured in the
same run), serial and with 4 threads sharing one client. Medians of 5 rounds
with min-max.

    python3 clients/python/bench/keepalive.py [--bin PATH] [--n 1500]

Builds the CLI with ``go build`` unless --bin is given; starts ``patrdb serve``
on a free loopback port over a scratch file.
"""

import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from patrdb_client import Client  # noqa: E402
from served import served  # noqa: E402


def rate(c, n, threads, reconnect):
    def work():
        for _ in range(n):
            c.run("bench")
            if reconnect:
                c.close()

    ts = [threading.Thread(target=work) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return n * threads / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with served(a.bin) as url:
        c = Client(url)
        c.create_run("bench", client_key="bench")
        for threads in (1, 4):
            per = {True: [], False: []}
            for _ in range(a.rounds):  # interleaved, so drift hits both alike
                for reconnect in (True, False):
                    per[reconnect].append(rate(c, a.n // threads, threads, reconnect))
            ratios = [k / r for k, r in zip(per[False], per[True])]
            for name, xs in (("new connection per request", per[True]), ("keep-alive", per[False])):
                print(f"{threads} thread(s), {name}: median {statistics.median(xs):.0f} req/s "
                      f"(min {min(xs):.0f}, max {max(xs):.0f})")
            print(f"{threads} thread(s), keep-alive / new connection: median {statistics.median(ratios):.2f}x "
                  f"(min {min(ratios):.2f}, max {max(ratios):.2f})")

if __name__ == "__main__":
    main()
