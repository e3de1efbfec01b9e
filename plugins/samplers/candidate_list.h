// candidate_list.h — edits of a Candidates list shared by the chain links.
//
// Every helper keeps ids[i] and logits[i] together. None of them depends on
// the order the list arrives in: where an order matters it is the rank order
// below, which is a pure function of (logit, id).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "duet/sampler.h"

namespace duet::samplers {

// True when candidate (la, ia) ranks before (lb, ib): the higher logit first,
// ties to the lower id. NaN ranks like -inf, so the order is a strict weak
// ordering even for a backend that produced NaN (std::sort requires one).
bool ranks_before(float la, int32_t ia, float lb, int32_t ib);

// Index of the best-ranked candidate. REQUIRES: c.ids is not empty.
size_t best_index(const Candidates& c);

// Indices of the `count` best-ranked candidates, best first.
// REQUIRES: count <= c.ids.size().
std::vector<size_t> best_indices(const Candidates& c, size_t count);

// Keeps only the candidates at `indices`, in that order.
// REQUIRES: `indices` is non-empty, and its entries are distinct and valid.
void keep_only(Candidates& c, const std::vector<size_t>& indices);

// Keeps only the candidate at `index` and selects it. Selecting links leave
// a single candidate so that no later link can drop the selected id.
void select_only(Candidates& c, size_t index);

}  // namespace duet::samplers
