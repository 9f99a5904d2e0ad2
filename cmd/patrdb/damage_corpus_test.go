package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/store"
)

// damageKinds are the ways TestRandomDamage breaks a copy of a file.
var damageKinds = []struct {
	name string
	do   func(b []byte, rng *rand.Rand, pageSize int) []byte
}{
	{"byte-flip", func(b []byte, rng *rand.Rand, _ int) []byte {
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		return b
	}},
	{"zero-4KiB", func(b []byte, rng *rand.Rand, _ int) []byte { return zeroBlock(b, rng, 4096) }},
	{"zero-16KiB", func(b []byte, rng *rand.Rand, _ int) []byte { return zeroBlock(b, rng, 16384) }},
	{"truncate", func(b []byte, rng *rand.Rand, _ int) []byte { return b[:rng.IntN(len(b))] }},
	{"garbage-tail", func(b []byte, rng *rand.Rand, _ int) []byte {
		tail := make([]byte, 1+rng.IntN(8192))
		for i := range tail {
			tail[i] = byte(rng.Uint32())
		}
		return append(b, tail...)
	}},
	{"swap-pages", func(b []byte, rng *rand.Rand, ps int) []byte {
		n := len(b) / ps
		i, j := rng.IntN(n), rng.IntN(n)
		tmp := append([]byte(nil), b[i*ps:(i+1)*ps]...)
		copy(b[i*ps:], b[j*ps:(j+1)*ps])
		copy(b[j*ps:], tmp)
		return b
	}},
}

func zeroBlock(b []byte, rng *rand.Rand, size int) []byte {
	if size > len(b) {
		size = len(b)
	}
	at := rng.IntN(len(b)/size) * size
	clear(b[at : at+size])
	return b
}

// TestRandomDamage breaks copies of two files (the 1 KiB-page damaged base
// and the golden fixture with 16 KiB pages) at random — a flipped byte, a
// zeroed 4 or 16 KiB block, a cut, a garbage tail, two pages swapped — and
// runs every read command, text and --json, on each in a child process: no
// crash, no hang over 10 s, and exit 0 only with exactly the output of the
// undamaged file. PATRDB_DAMAGE_TRIALS (default 30 per file) and
// PATRDB_DAMAGE_SEED set the run; it stops early after
// PATRDB_DAMAGE_BUDGET (default 40s). RELIABILITY.md has the long run.
func TestRandomDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns hundreds of child processes")
	}
	trials := envInt(t, "PATRDB_DAMAGE_TRIALS", 30)
	seed := uint64(envInt(t, "PATRDB_DAMAGE_SEED", 1))
	budget := 40 * time.Second
	if s := os.Getenv("PATRDB_DAMAGE_BUDGET"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		budget = d
	}
	plainBinary(t) // built before the budget starts: on a cold cache it takes a while
	start := time.Now()
	dir := t.TempDir()
	type source struct {
		path     string
		pageSize int
	}
	sources := []source{
		{copyTo(t, filepath.Join(damagedDir, "base.db"), filepath.Join(dir, "base.db")), damagedPageSize},
		{fixture(t), store.DefaultOptions().PageSize},
	}
	counts := map[string]int{}
	for si, src := range sources {
		raw, err := os.ReadFile(src.path)
		if err != nil {
			t.Fatal(err)
		}
		clean := map[string]result{}
		for _, args := range readOnlyCommands {
			clean[strings.Join(args, " ")] = readUndamaged(t, src.path, args)
		}
		rng := rand.New(rand.NewPCG(seed, uint64(si)))
		for trial := 0; trial < trials && time.Since(start) < budget; trial++ {
			kind := damageKinds[rng.IntN(len(damageKinds))]
			b := kind.do(append([]byte(nil), raw...), rng, src.pageSize)
			path := filepath.Join(dir, fmt.Sprintf("damaged-%d-%d.db", si, trial))
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			counts["trials"]++
			counts["trials "+kind.name]++
			for _, args := range readOnlyCommands {
				r, hung := readCommand(t, path, args)
				what := fmt.Sprintf("seed %d file %d trial %d (%s)", seed, si, trial, kind.name)
				judgeDamaged(t, what, args, r, hung, clean[strings.Join(args, " ")])
				counts["runs"]++
				switch {
				case hung:
					counts["hung"]++
				case r.code == 0:
					counts["exit 0 (same output)"]++
				default:
					counts["exit "+strconv.Itoa(r.code)]++
				}
			}
			if t.Failed() {
				keep := filepath.Join(os.TempDir(), filepath.Base(path))
				_ = os.Rename(path, keep)
				t.Fatalf("kept %s", keep)
			}
			_ = os.Remove(path)
		}
	}
	t.Logf("%v in %v", counts, time.Since(start).Round(time.Millisecond))
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}
