// Command loadtest measures the serve API under concurrent writers: N
// loopback clients append turns to their own branches, bounded in count and
// time, against the same work done in-process through store.DB.Update. It
// prints throughput (and its ratio to in-process), p50/p99 latency, and
// checks afterwards that no write was lost or duplicated — including the
// requests it deliberately sends twice, as a client retrying would.
//
//	go run ./bench/loadtest -clients 8 -turns 200 -duration 20s
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	cfg := defaultConfig()
	flag.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent clients (each appends to its own branch)")
	flag.IntVar(&cfg.Turns, "turns", cfg.Turns, "turns each client appends (the count bound)")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "stop issuing requests after this long (the time bound)")
	flag.IntVar(&cfg.Batch, "batch", cfg.Batch, "turns per request / transaction")
	flag.IntVar(&cfg.Tokens, "tokens", cfg.Tokens, "action tokens per turn (observations are 4× as long)")
	flag.IntVar(&cfg.RetryEvery, "retry-every", cfg.RetryEvery, "send every n-th request twice with the same client key (0: never)")
	flag.BoolVar(&cfg.NoSync, "nosync", cfg.NoSync, "skip fsync on commit (both sides)")
	flag.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "alternate the in-process and HTTP phases this many times (medians reported)")
	flag.Parse()
	dir, err := os.MkdirTemp("", "patrdb-loadtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	defer os.RemoveAll(dir)
	rep, err := Run(cfg, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
	rep.Print(os.Stdout)
	if rep.Lost != 0 || rep.Duplicated != 0 {
		os.Exit(1)
	}
}
