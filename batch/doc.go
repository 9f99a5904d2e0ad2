// Package batch is a trainer's batch for one rollout step: flat arrays
// ready for a GPU, their credit rules and loss coefficients, and the file
// that carries them (Options, Batch, Expand, Decode, WriteTo). Assemble
// builds a batch from a Source — the step's groups, the leaves that
// become rows, the turns on their paths — and computes every figure the
// batch carries, by the rules below. Package batchdb reads the Source
// from the store in one read transaction; package sourcewire carries it
// over HTTP, so a client builds the same batch from far fewer bytes than
// the batch holds. This package imports no storage, so a client that fetches
// batches over HTTP links none. The two layouts:
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
// Per token both carry input_ids, loss_mask, old_logprobs and advantages
// (0 wherever loss_mask is 0), positions (the token's index in its row's
// sequence), the loss coefficients coef_pos, coef_neg and loss_weight
// (below), and, whatever the credit rule, policy_versions (the version
// that sampled the token's turn; 0 on prompt tokens), turn_index (the
// turn's index on the path, 0 for the first turn after the prompt; -1 on
// prompt tokens) and turn_rewards (each turn's reward on its last action
// token, 0 elsewhere; a turn without action tokens has nowhere to put its
// reward and is counted in TurnRewardsDropped). Per row: the leaf, group,
// status, outcome reward and advantage, the range of policy versions on
// its path, and its prompt length (RowPromptLen: the row's first tokens
// are its prompt, the rest its response).
//
// # Credit on shared tokens
//
// Branches of a tree share their prefix: a token on it is in every row
// whose leaf is below it. Options.Credit says which of those rows train
// it and with which advantage. Write S_t for the rows of the batch that
// contain token t, A_r for row r's leaf advantage (its GRPO advantage,
// model.Advantage; 0 for a failed row), and the owner of t for the row
// of S_t whose leaf has the smallest node id. Then the rows layout has,
// on each action token t of row r, loss mask m_rt and advantage A_rt:
//
//   - Repeat (the default): m_rt = 1 and A_rt = A_r in every row. Each
//     leaf trains its full trajectory as an independent sample, so a
//     shared token is trained |S_t| times: this is GRPO over the leaves'
//     trajectories, the objective PaTR trains.
//   - Mean: m_rt = 1 only in t's owner row, with A_rt = (1/|S_t|)·Σ_{r∈S_t}
//     A_r, the mean advantage of the leaves below t (the tree estimators'
//     credit); 0 in the other rows.
//   - Owner: m_rt = 1 only in t's owner row, with A_rt = A_owner; 0 in the
//     others. This is the rule of format 1 files, kept byte for byte.
//
// Repeat is the default because it is the method's objective: PaTR's
// advantages are plain GRPO over every leaf, and GRPO trains each
// sampled trajectory whole. Under Mean and Owner a shared prefix gets
// one update however many leaves grew from it.
//
// # The loss, exactly in both layouts
//
// With ratio ρ_t = exp(logπ(t) − old_logprob_t) and clip ε, PPO/GRPO's
// token loss is ℓ(ρ, A) = −min(ρA, clip(ρ, 1−ε, 1+ε)·A). Within each sign
// of A it is linear in A:
//
//	A ≥ 0:  ℓ = −A·min(ρ, 1+ε)
//	A < 0:  ℓ = |A|·max(ρ, 1−ε)
//	so      ℓ(ρ, A) = −A⁺·min(ρ, 1+ε) + A⁻·max(ρ, 1−ε),  A⁺ = max(A, 0), A⁻ = max(−A, 0).
//
// (for A < 0 and ρ < 1−ε, min(ρA, (1−ε)A) = (1−ε)A since A < 0; the
// other cases are read off the same way.) The rows loss is
// L = Σ_r Σ_t w_r·m_rt·ℓ(ρ_t, A_rt), with the normalisation Options.Norm:
//
//   - TokenMean: w_r = 1/N, N = Σ_r Σ_t m_rt, the trained tokens of all
//     rows (LossTokens).
//   - SeqMeanTokenMean: w_r = 1/(R·n_r), n_r = Σ_t m_rt the row's trained
//     tokens, R the rows with n_r > 0 (LossRows); a row that trains
//     nothing is left out rather than divided by 0.
//
// A token shared by the rows S_t has the same context in each of them,
// so the same logits, and the same recorded old logprob: ρ_t is one
// number per token of the tree. Gathering the rows' terms by tree token,
//
//	L = Σ_t Σ_{r∈S_t} w_r·m_rt·(−A⁺_rt·min(ρ_t, 1+ε) + A⁻_rt·max(ρ_t, 1−ε))
//	  = Σ_t −c⁺_t·min(ρ_t, 1+ε) + c⁻_t·max(ρ_t, 1−ε),
//	c⁺_t = Σ_{r∈S_t} w_r·m_rt·A⁺_rt,   c⁻_t = Σ_{r∈S_t} w_r·m_rt·A⁻_rt,
//
// an identity in ρ, so the loss computed once over the packed tree with
// these coefficients (coef_pos, coef_neg) equals the rows loss, and so
// does its gradient, for every credit rule and both normalisations. Any
// other per-token term f_t normalised the same way (a KL penalty, an
// entropy bonus) is Σ_t ω_t·f_t with ω_t = Σ_{r∈S_t} w_r·m_rt
// (loss_weight); Σ_t ω_t = 1. Dual-clip PPO, which caps the A < 0 branch
// at c·|A|, is still |A| times a function of ρ, so the same coefficients
// serve it. For Repeat, c_t sums w_r·A_r over every row below t; for
// Mean and Owner it has one term, the owner's.
//
// The rows layout carries the same arrays per row copy (c⁺ = w_r·m_rt·
// A⁺_rt, ω = w_r·m_rt), so one loss function over coef_pos and coef_neg
// serves both layouts; a trainer that computes the rows loss from
// loss_mask and advantages gets the same number. The coefficients are
// normalised over the whole batch: a trainer that splits it into
// micro-batches sums their losses, rather than averaging them. They are
// computed in float64 from the float32 advantages the rows hold and
// stored as float32.
//
// In the tree layout loss_mask is 1 on every action token (some row
// trains each), and advantages holds, per token, the owner's advantage
// (Owner) or the mean advantage of the rows that contain it (Mean and
// Repeat — under Repeat the token is trained |S_t| times, which only the
// coefficients carry). Expand turns a tree batch into exactly the rows
// batch read with the same options.
//
// # Which leaves
//
// Rows are the leaves of the step's closed groups (open groups have no
// advantages yet and are listed in OpenGroups): completed, pruned and
// truncated nodes, each optional, and failed nodes on request (they are no
// GRPO leaf: advantage 0, but they count in S_t, N and R). Options.
// MinPolicyVersion and MaxPolicyVersion drop rows any of whose turns was
// sampled outside that window of policy versions (a staleness filter).
// Rows are ordered by group id, then leaf id. S_t is over the rows of the
// batch: a filter that drops leaves changes the mean and the counts.
//
// # Files
//
// WriteTo writes the batch as a safetensors file (package safetensors);
// Decode reads one back. The metadata names the credit rule ("credit",
// with "credit_rule" in words), the normalisation ("loss_norm") and its
// divisors ("loss_tokens", "loss_rows"). Every value must fit its tensor
// or the batch is refused with ErrOutOfRange rather than wrapped: token
// ids are written as I32, the index type embedding layers take, so they
// must be below 2^31 (the store refuses larger ones; a file written
// before it did may hold them), policy versions as I64, positions and
// turn indexes as I32.
package batch
