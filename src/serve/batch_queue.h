// The server's batching: requests from many connections wait in one queue, and worker threads
// translate them together, so that many clients with one sentence each get the throughput of
// batched translation. A free worker takes the oldest request and every later one that searches
// the same way (beam size, n-best, attention), up to `max_batch_sentences`. While another worker
// is busy (the server is under load), the oldest has waited less than `max_wait` and the batch is
// not full, it waits for more; with every other worker idle it starts at once, so that a lone
// client never waits. Requests that arrive while batches are translated form the next ones. With several workers each
// runs its batch on one thread of its own, side by side (as nmt translate runs small batches); with one, the batch's
// operators use all of LibTorch's threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/translate_options.h"
#include "inference/model.h"
#include "search/translator.h"

namespace nmt::serve {

struct BatchQueueOptions {
  size_t max_batch_sentences = 64;
  size_t workers = 1;
  std::chrono::microseconds max_wait{2000};
  BatchingOptions batching;  // how the worker cuts a batch for the search (Translator)
};

class BatchQueue {
 public:
  BatchQueue(const TranslationModel& model, BatchQueueOptions options, torch::Device device);
  // Translates every request already queued, then stops the worker.
  ~BatchQueue();
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Blocks until `lines` are translated (in their order); rethrows the search's exception.
  std::vector<Translation> translate(std::vector<std::string> lines, const SearchOptions& search);

  // Sentences translated and batches run so far.
  size_t sentences_done() const;
  size_t batches_done() const;

 private:
  struct Request {
    std::vector<std::string> lines;
    SearchOptions search;
    std::chrono::steady_clock::time_point arrival;
    std::promise<std::vector<Translation>> result;
  };
  void work();
  // Moves the oldest request and the ones that can share its batch out of queue_ (mutex_ held).
  std::vector<Request> take_batch();

  const TranslationModel& model_;
  BatchQueueOptions options_;
  torch::Device device_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Request> queue_;
  bool stopping_ = false;
  size_t sentences_done_ = 0;
  size_t batches_done_ = 0;
  size_t busy_workers_ = 0;  // translating a batch now
  std::vector<std::thread> workers_;
};

}  // namespace nmt::serve
