// softmax.h — candidate probabilities, the one place links turn logits into
// probabilities.
#pragma once

#include <vector>

namespace duet::samplers {

// softmax(logits), in the same order, computed in double with the maximum
// subtracted; the result sums to 1. Logits that are not finite get a
// defined answer instead of NaN: NaN and -inf logits get probability 0; if
// some logits are +inf they share all the probability equally; if no logit
// is above -inf, every non-NaN one is equally likely (every one, if all are
// NaN). REQUIRES: logits is not empty.
std::vector<double> softmax(const std::vector<float>& logits);

}  // namespace duet::samplers
