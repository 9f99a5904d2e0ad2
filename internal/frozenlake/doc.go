// Package frozenlake is the toy environment patrdb's demo trainer runs on:
// Gymnasium's FrozenLake-v1 (its two standard maps, its slip rule and its
// TimeLimit), a progress scorer for PaTR routing, trajectory features for
// ARBOR rubric judging, and a tabular softmax policy trained with a clipped
// GRPO/PPO surrogate.
//
// Everything here is a pure, deterministic building block so that a crashed
// run resumed from the store replays bit for bit:
//
//   - [Map.Step] never draws randomness; the caller passes the uniform that
//     decides the slip.
//   - [Uniform] derives that uniform from (seed, keys...) by hash mixing, not
//     from a shared generator stream, so the draw for turn t of node n at
//     step s is the same whether or not anything before it was replayed.
//   - [Policy.Sample] takes its uniform the same way, and [Policy.Update]
//     depends only on its arguments.
//
// The environment pieces (env.go, policy.go, scorer.go, features.go) use
// only the standard library; the trainer and its adapters import store,
// tree, rubricpool and runconfig, since they write the run through them
// (its config is a runconfig.Config with the trainer's own members beside
// it, so every reader of run configs reads the demo's).
//
// The package keeps no global mutable state. agent.go adapts these pieces
// to the tree driver's Policy/Env/Scorer interfaces, and the trainer runs
// PaTR or plain GRPO on them with every rollout in the store. Two choices
// of the trainer shape what it measures: the goal pays Discount^(moves-1)
// (undiscounted, a wall bump is free and the greedy policy can loop on
// one), and an env-step budget is enforced by the environment refusing
// moves (see [Played]), so two runs given the same budget play exactly the
// same number of moves. [RunFigures], [LoadCurve] and [Bands] read a run's
// figures and learning curve back from the store.
package frozenlake
