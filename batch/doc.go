// Package batch reads a trainer's batch for one rollout step straight from
// the store, in one read transaction, as flat arrays ready for a GPU:
//
//   - Rows: one row per leaf, its whole sequence — the group's prompt
//     tokens, then every turn on the path from the root (each turn's action
//     tokens, then its observation tokens), the shared prefix included.
//     Rows are packed back to back; RowOffsets (cu_seqlens) delimit them.
//   - Tree: every token once. A segment is a run of consecutive turns of
//     one node that the same set of rows shares (or a group's prompt); each
//     names its parent segment, so a tree-attention trainer sees the
//     forest; RowSegment gives each row's last segment.
//
// Per token both carry input_ids, loss_mask (1 on action tokens, 0 on
// prompt and observation tokens), old_logprobs and advantages (0 wherever
// loss_mask is 0) and positions (the token's index in its row's sequence).
//
// # Each shared prefix is trained once
//
// Turns shared by several rows (the prefix of a tree's branches) are
// trainable in exactly one of them, their owner: the row whose leaf has
// the smallest node id among the rows of the batch that contain them. In
// every other row those tokens are present (the model needs them as
// context) but masked, with logprob and advantage 0. The advantage on a
// row's trainable tokens is its leaf's GRPO advantage (store.Advantage).
// In the tree layout every segment belongs to its owner row, so its
// action tokens carry that row's advantage; expanding the tree along each
// row's segments, masking the segments the row does not own, gives exactly
// the rows layout (Expand).
//
// # Which leaves
//
// Rows are the leaves of the step's closed groups (open groups have no
// advantages yet and are listed in OpenGroups): completed, pruned and
// truncated nodes, each optional, and failed nodes on request (they are no
// GRPO leaf: advantage 0). Options.MinPolicyVersion and MaxPolicyVersion
// drop rows any of whose turns was sampled outside that window of policy
// versions (a staleness filter). Rows are ordered by group id, then leaf
// id.
//
// # Files
//
// WriteTo writes the batch as a safetensors file (package safetensors);
// Decode reads one back. Token ids are written as I32, the index type
// embedding layers take: they must be below 2^31, as every vocabulary is.
package batch
