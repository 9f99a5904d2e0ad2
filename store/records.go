package store

import "github.com/patrdb/patrdb/model"

// validStep refuses a step outside 1..MaxStep.
func validStep(step uint64) error {
	if step == 0 || step > model.MaxStep {
		return invalidf("step %d: steps run from 1 to %d", step, uint64(model.MaxStep))
	}
	return nil
}
