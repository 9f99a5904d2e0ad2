package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/patrdb/patrdb/model"
)

// ActRequest is one branch's turn to sample.
type ActRequest struct {
	Key     TurnKey
	Task    Task
	History []model.Turn // the full path so far; must not be modified
}

// BatchPolicy samples the next action of many branches in one call, as an
// inference server (vLLM, SGLang) generates a whole batch at once. The
// engine hands it every branch that needs a turn, up to Options.MaxBatch
// per call. It returns one Move per request, in order; an error fails
// every request of the call, unless it is an ItemErrors, which fails only
// the requests it names.
type BatchPolicy interface {
	ActBatch(ctx context.Context, reqs []ActRequest) ([]Move, error)
}

// ItemErrors fails some requests of a batch call, by index; the others'
// moves are used.
type ItemErrors map[int]error

func (e ItemErrors) Error() string {
	idx := make([]int, 0, len(e))
	for i := range e {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	parts := make([]string, 0, min(len(idx), 3))
	for _, i := range idx[:min(len(idx), 3)] {
		parts = append(parts, fmt.Sprintf("request %d: %v", i, e[i]))
	}
	more := ""
	if len(idx) > 3 {
		more = fmt.Sprintf(" (and %d more)", len(idx)-3)
	}
	return fmt.Sprintf("%d of the batch's requests failed: %s%s", len(e), strings.Join(parts, "; "), more)
}
