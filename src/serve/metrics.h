// What GET /metrics tells Prometheus (its text format, version 0.0.4): requests by route and status,
// their latency, rejects by reason, batch sizes, sentences and subwords translated, and the gauges
// of the moment (requests in flight, sentences queued, models loaded, readiness). Labels take
// few values whatever clients send: a path that is not an endpoint counts as route "other".
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serve/http_server.h"

namespace nmt::serve {

// A Prometheus histogram: counts of observations at most each bound, their sum and number.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The _bucket, _sum and _count lines of `name` with `labels` ("route=\"/translate\"" or "").
  std::string lines(const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, not cumulative; one more for +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The gauges, read when /metrics is asked.
struct MetricsGauges {
  size_t requests_in_flight = 0;  // being handled: queued or translated
  size_t queued_sentences = 0;    // waiting in the batch queue
  size_t models = 0;              // loaded (an ensemble's members)
  bool ready = false;             // what GET /ready says
  double start_time = 0;          // seconds since the epoch
};

// The route label of a path: one of the endpoints, or "other".
std::string route_label(std::string_view path);
// The reason label of a status that refuses a request ("unauthorized" of 401), or "" for one that
// does not (2xx).
std::string reject_reason(int status);

class ServerMetrics {
 public:
  ServerMetrics();
  // A request and its answer (HttpRoutes::done), from any thread.
  void count(const HttpExchange& exchange);
  // A batch of `sentences` translated together (when it starts, or when requests join a
  // continuous batch: the sentences it then holds).
  void count_batch(size_t sentences);
  // What one request's answer held.
  void count_translated(size_t sentences, size_t source_subwords, size_t target_subwords);
  // The whole exposition, with `gauges`.
  std::string text(const MetricsGauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // by route and status
  std::map<std::string, Histogram> latency_;                  // by route
  std::map<std::string, uint64_t> rejects_;                   // by reason
  uint64_t answers_cut_ = 0;                                  // connections lost while an answer was written
  Histogram batch_sentences_;
  uint64_t sentences_ = 0, source_subwords_ = 0, target_subwords_ = 0;
};

}  // namespace nmt::serve
