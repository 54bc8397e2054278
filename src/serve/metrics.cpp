#include "serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace nmt::serve {

namespace {

// Prometheus' default latency buckets, in seconds.
const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
const std::array<std::string_view, 5> kRoutes = {"/", "/health", "/ready", "/metrics", "/translate"};

std::string number(double value) { return fmt::format("{}", value); }  // the shortest that reads back

void describe(std::string& text, const std::string& name, const char* type, const char* help) {
  text += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

std::string Histogram::lines(const std::string& name, const std::string& labels) const {
  std::string text;
  const std::string before = labels.empty() ? "" : labels + ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string bound = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    text += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, before, bound, cumulative);
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  text += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, number(sum_), name, braces, count_);
  return text;
}

std::string route_label(std::string_view path) {
  for (std::string_view route : kRoutes) {
    if (path == route) return std::string(route);
  }
  return "other";
}

std::string reject_reason(int status) {
  switch (status) {
    case 400:
      return "bad_request";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden_origin";
    case 404:
      return "not_found";
    case 405:
      return "method_not_allowed";
    case 408:
      return "timeout";
    case 413:
      return "too_large";
    case 415:
      return "unsupported_media_type";
    case 421:
      return "wrong_host";
    case 431:
      return "headers_too_large";
    case 500:
      return "internal_error";
    case 503:
      return "busy";
    default:
      return status >= 400 ? "other" : "";
  }
}

ServerMetrics::ServerMetrics() : batch_sentences_(kBatchBounds) {
  for (std::string_view route : kRoutes) latency_.emplace(std::string(route), Histogram(kLatencyBounds));
  latency_.emplace("other", Histogram(kLatencyBounds));
}

void ServerMetrics::count(const HttpExchange& exchange) {
  const std::string route = route_label(exchange.path);
  const std::string reason = reject_reason(exchange.status);
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{route, exchange.status}];
  latency_.at(route).observe(exchange.seconds);
  if (!reason.empty()) ++rejects_[reason];
  if (!exchange.answered) ++answers_cut_;
}

void ServerMetrics::count_batch(size_t sentences) {
  std::lock_guard<std::mutex> lock(mutex_);
  batch_sentences_.observe(static_cast<double>(sentences));
}

void ServerMetrics::count_translated(size_t sentences, size_t source_subwords, size_t target_subwords) {
  std::lock_guard<std::mutex> lock(mutex_);
  sentences_ += sentences;
  source_subwords_ += source_subwords;
  target_subwords_ += target_subwords;
}

std::string ServerMetrics::text(const MetricsGauges& gauges) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  describe(text, "nmt_http_requests_total", "counter", "Requests answered, by route and HTTP status.");
  for (const auto& [key, count] : requests_) {
    text += fmt::format("nmt_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  }
  describe(text, "nmt_http_request_duration_seconds", "histogram",
           "Seconds from a request's first byte to its answer's last, by route.");
  for (const auto& [route, histogram] : latency_) {
    text += histogram.lines("nmt_http_request_duration_seconds", "route=\"" + route + "\"");
  }
  describe(text, "nmt_http_rejects_total", "counter", "Requests refused, by reason.");
  for (const auto& [reason, count] : rejects_) {
    text += fmt::format("nmt_http_rejects_total{{reason=\"{}\"}} {}\n", reason, count);
  }
  describe(text, "nmt_http_answers_cut_total", "counter",
           "Answers whose connection was lost before they were written whole.");
  text += fmt::format("nmt_http_answers_cut_total {}\n", answers_cut_);
  describe(text, "nmt_http_requests_in_flight", "gauge", "Requests being handled: queued or being translated.");
  text += fmt::format("nmt_http_requests_in_flight {}\n", gauges.requests_in_flight);
  describe(text, "nmt_queue_sentences", "gauge", "Sentences waiting in the batch queue.");
  text += fmt::format("nmt_queue_sentences {}\n", gauges.queued_sentences);
  describe(text, "nmt_batch_sentences", "histogram",
           "Sentences translated together: a batch when it starts, a continuous batch when requests join it.");
  text += batch_sentences_.lines("nmt_batch_sentences", "");
  describe(text, "nmt_sentences_translated_total", "counter", "Sentences translated.");
  text += fmt::format("nmt_sentences_translated_total {}\n", sentences_);
  describe(text, "nmt_source_subwords_total", "counter", "Source subwords translated.");
  text += fmt::format("nmt_source_subwords_total {}\n", source_subwords_);
  describe(text, "nmt_target_subwords_total", "counter", "Target subwords produced (best translations).");
  text += fmt::format("nmt_target_subwords_total {}\n", target_subwords_);
  describe(text, "nmt_models_loaded", "gauge", "Models loaded (the members of an ensemble).");
  text += fmt::format("nmt_models_loaded {}\n", gauges.models);
  describe(text, "nmt_ready", "gauge", "1 when GET /ready answers 200.");
  text += fmt::format("nmt_ready {}\n", gauges.ready ? 1 : 0);
  describe(text, "process_start_time_seconds", "gauge", "When the server started, in seconds since the epoch.");
  text += "process_start_time_seconds " + number(gauges.start_time) + "\n";
  return text;
}

}  // namespace nmt::serve
