// Package tree implements PaTR, process-scorer guided adaptive tree rollout.
//
// Routing is the heart of the method and is kept pure on purpose: Route takes
// the recorded process scores of a group's still-active branches at the end
// of an interval and returns, for each branch, whether it is expanded into
// children, survives to the next interval, or is pruned, together with the
// values that produced the decision (score, reference, delta, rule). Because
// it reads nothing but its arguments, replay can re-run it on stored scores
// and must get the same decisions, and what-if analysis can re-run it under a
// different Config.
package tree
