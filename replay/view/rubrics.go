package view

import (
	"fmt"
	"sort"
	"strings"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// RubricQuery selects a page of a run's rubrics.
type RubricQuery struct {
	// Pools to include; empty means public and candidate, the rubrics in
	// play (retired and merged ones are history).
	Pools []model.RubricPool
	// Text keeps the rubrics whose text or feature contains it, ignoring
	// case.
	Text string
	// Sort is "id" (the default), "rho", "support" or "activations"; the
	// figures sort highest first, ties by id.
	Sort   string
	Offset int
	Limit  int // 0 means 50
}

// RubricPage is one page of a RubricQuery's matches.
type RubricPage struct {
	Total   int                      `json:"total"` // matches, over every page
	Offset  int                      `json:"offset"`
	Limit   int                      `json:"limit"`
	Pools   map[model.RubricPool]int `json:"pools"` // every pool's size, unfiltered
	Rubrics []model.Rubric           `json:"rubrics"`
}

// MaxRubricPage is the most rubrics one page holds.
const MaxRubricPage = 500

// Rubrics returns q's page of r's rubrics: pools in the order public,
// candidate, retired, merged, then by q.Sort.
func Rubrics(r *store.RunTx, q RubricQuery) (*RubricPage, error) {
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Offset < 0 || q.Limit < 0 || q.Limit > MaxRubricPage {
		return nil, fmt.Errorf("%w: offset %d, limit %d (want offset >= 0, limit 1..%d)", ErrViewQuery, q.Offset, q.Limit, MaxRubricPage)
	}
	var key func(*model.Rubric) float64
	switch q.Sort {
	case "", "id":
	case "rho":
		key = func(rb *model.Rubric) float64 { return rb.Rho }
	case "support":
		key = func(rb *model.Rubric) float64 { return float64(rb.Support) }
	case "activations":
		key = func(rb *model.Rubric) float64 { return float64(rb.Usage.Activations) }
	default:
		return nil, fmt.Errorf("%w: sort %q (want id, rho, support or activations)", ErrViewQuery, q.Sort)
	}
	pools := q.Pools
	if len(pools) == 0 {
		pools = []model.RubricPool{model.PoolPublic, model.PoolCandidate}
	}
	want := map[model.RubricPool]bool{}
	for _, p := range pools {
		if !p.Valid() {
			return nil, fmt.Errorf("%w: pool %q (want candidate, public, retired or merged)", ErrViewQuery, p)
		}
		want[p] = true
	}
	all, err := r.Rubrics("")
	if err != nil {
		return nil, err
	}
	out := &RubricPage{Offset: q.Offset, Limit: q.Limit, Pools: map[model.RubricPool]int{}, Rubrics: []model.Rubric{}}
	text := strings.ToLower(q.Text)
	var hits []model.Rubric
	for _, rb := range all {
		out.Pools[rb.Pool]++
		if !want[rb.Pool] {
			continue
		}
		if text != "" && !strings.Contains(strings.ToLower(rb.Text), text) && !strings.Contains(strings.ToLower(rb.Feature), text) {
			continue
		}
		hits = append(hits, rb)
	}
	rank := map[model.RubricPool]int{model.PoolPublic: 0, model.PoolCandidate: 1, model.PoolRetired: 2, model.PoolMerged: 3}
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := &hits[i], &hits[j]
		if rank[a.Pool] != rank[b.Pool] {
			return rank[a.Pool] < rank[b.Pool]
		}
		if key != nil && key(a) != key(b) {
			return key(a) > key(b)
		}
		return a.ID < b.ID
	})
	out.Total = len(hits)
	if q.Offset < len(hits) {
		out.Rubrics = hits[q.Offset:min(len(hits), q.Offset+q.Limit)]
	}
	return out, nil
}
