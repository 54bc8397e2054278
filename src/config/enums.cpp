#include "config/enums.h"

namespace nmt {

const EnumNames<Metric>& metric_names() {
  static const EnumNames<Metric> names = {
      {"bleu", Metric::kBleu}, {"chrf", Metric::kChrf}, {"loss", Metric::kLoss}, {"perplexity", Metric::kPerplexity}};
  return names;
}

std::string to_string(Metric value) { return name_of(metric_names(), value); }

bool higher_is_better(Metric metric) { return metric == Metric::kBleu || metric == Metric::kChrf; }

}  // namespace nmt
