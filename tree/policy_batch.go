package tree

import (
	"context"

	"github.com/patrdb/patrdb/rollout"
)

// ActRequest, BatchPolicy and ItemErrors are package rollout's.
type (
	ActRequest  = rollout.ActRequest
	BatchPolicy = rollout.BatchPolicy
	ItemErrors  = rollout.ItemErrors
)

// Batched adapts a one-branch Policy: each request is one Act call, and a
// failing call fails only its request.
func Batched(p Policy) BatchPolicy { return batched{p} }

type batched struct{ p Policy }

func (b batched) ActBatch(ctx context.Context, reqs []ActRequest) ([]Move, error) {
	out := make([]Move, len(reqs))
	var errs ItemErrors
	for i, r := range reqs {
		m, err := b.p.Act(ctx, r.Key, r.Task, r.History)
		if err != nil {
			if errs == nil {
				errs = ItemErrors{}
			}
			errs[i] = err
			continue
		}
		out[i] = m
	}
	if errs != nil {
		return out, errs
	}
	return out, nil
}
