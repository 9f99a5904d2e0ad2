package tree

import (
	"context"

	"github.com/patrdb/patrdb/rollout"
)

// Batched adapts a one-branch Policy: each request is one Act call, and a
// failing call fails only its request.
func Batched(p rollout.Policy) rollout.BatchPolicy { return batched{p} }

type batched struct{ p rollout.Policy }

func (b batched) ActBatch(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	out := make([]rollout.Move, len(reqs))
	var errs rollout.ItemErrors
	for i, r := range reqs {
		m, err := b.p.Act(ctx, r.Key, r.Task, r.History)
		if err != nil {
			if errs == nil {
				errs = rollout.ItemErrors{}
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
