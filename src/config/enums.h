// Choices that the training configuration offers beyond those of the parts it configures (the
// vocabulary type is text/vocabulary.h's, the attention scorer the registry's).
#pragma once

#include <cstddef>

#include <string>

#include "util/enum_names.h"

namespace nmt {

// Validation metric that selects the best checkpoint and drives the schedule.
enum class Metric { kBleu, kChrf, kLoss, kPerplexity };
inline constexpr size_t kMetrics = 4;  // the values of Metric, 0 to kMetrics - 1

const EnumNames<Metric>& metric_names();

// The text name of a value: to_string(Metric::kBleu) == "bleu".
std::string to_string(Metric value);

// True when higher values of the metric are better.
bool higher_is_better(Metric metric);

}  // namespace nmt
