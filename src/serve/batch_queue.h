// The server's batching: requests from many connections wait in one queue, and worker threads
// translate them together, so that many clients with one sentence each get the throughput of
// batched translation. A free worker takes the oldest request and, of the others that search the
// same way (beam size, n-best, attention), those nearest to it in length (bytes per line) up to
// `max_batch_sentences`, so that when more wait than a batch holds, its sentences are of like
// lengths as in nmt translate's sorted batches; while the oldest has waited less than `max_wait`
// and the batch is not full, it waits for more. Requests that arrive
// while a batch is translated form the next one. One worker runs its batch's operators on all of
// LibTorch's threads; several run one batch each, side by side, on one thread each.
//
// Greedy requests (search/continuous.h) are batched continuously instead: while the oldest waiting
// request is one, the worker takes the waiting requests in their order into its running batch
// between two decoder steps, up to `max_batch_sentences`, and answers each as soon as its sentences
// have ended. Any other request waits until that batch has run out, then goes as above.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/translate_options.h"
#include "inference/model.h"
#include "search/translator.h"

namespace nmt::serve {

// What the choice of a batch reads of a waiting request (the oldest first).
struct WaitingRequest {
  size_t lines;
  double bytes_per_line;  // its length: sentences are not yet split into subwords
  bool same_search;       // it searches as the oldest does (beam size, n-best, attention, ...)
};
// Which of `waiting` make the next batch: the oldest, however many lines it has, and of those that
// search the same way, the nearest to it in length, while the batch stays within max_sentences.
std::vector<bool> choose_batch(const std::vector<WaitingRequest>& waiting, size_t max_sentences);

struct BatchQueueOptions {
  size_t max_batch_sentences = 64;
  size_t workers = 1;  // each on one thread when several
  std::chrono::microseconds max_wait{2000};
  bool continuous = true;    // greedy requests batched continuously
  BatchingOptions batching;  // how the worker cuts a batch for the search (Translator)
  // Told the sentences of each batch as it starts, and of a continuous batch each time requests
  // join it (on a worker's thread; it must not block), or empty.
  std::function<void(size_t sentences)> on_batch;
};

class BatchQueue {
 public:
  BatchQueue(const TranslationModels& models, BatchQueueOptions options, torch::Device device);
  // Translates every request already queued, then stops the workers.
  ~BatchQueue();
  // The same, before the queue is destroyed: nmt serve stops it before its HTTP server goes, so
  // that no worker still holds a connection's answer then. A second call does nothing.
  void stop();
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // Called once, on a worker's thread, with the translations of a request's lines in their order,
  // or with the search's exception (and no translations).
  using Done = std::function<void(std::vector<Translation> translations, std::exception_ptr error)>;

  // Queues `lines` and returns at once; `done` gets their translations. The server's connections
  // wait for their answers this way, without a thread each.
  // prefixes, constraints: one line per line (search/translator.h, TargetGuides), or none.
  // subwords: each line's source ids as the caller encoded them to check the request, which the
  // search takes instead of encoding the line again; or none.
  // target_language: a multilingual model's (TextOptions::target_language), checked by the caller.
  // Throws std::runtime_error once the queue is stopping.
  void submit(std::vector<std::string> lines, const SearchOptions& search, std::vector<std::string> prefixes,
              std::vector<std::string> constraints, std::vector<std::vector<int64_t>> subwords, Done done,
              std::string target_language = "");

  // submit() that blocks until `lines` are translated, and rethrows the search's exception.
  std::vector<Translation> translate(std::vector<std::string> lines, const SearchOptions& search,
                                     std::vector<std::string> prefixes = {}, std::vector<std::string> constraints = {},
                                     std::vector<std::vector<int64_t>> subwords = {}, std::string target_language = "");

  // Sentences translated and batches run so far (with continuous batching, each group of requests
  // that joined a running batch counts as one).
  size_t sentences_done() const;
  size_t batches_done() const;
  // Sentences waiting for a worker.
  size_t sentences_waiting() const;
  // Sentences whose search stopped at an output cap (Translation::capped).
  size_t sentences_capped() const { return sentences_capped_.load(); }
  size_t workers() const { return workers_.size(); }

 private:
  struct Request {
    std::vector<std::string> lines;
    std::vector<std::string> prefixes;           // one per line, or none
    std::vector<std::string> constraints;        // one per line, or none
    std::vector<std::vector<int64_t>> subwords;  // one per line, or none
    SearchOptions search;
    std::string target_language;
    std::chrono::steady_clock::time_point arrival;
    Done done;
  };
  void work();
  // The id of the target-language token `request`'s sentences start with, or -1.
  int64_t language_tag(const Request& request) const;
  // Whether two requests can share a static batch: the same search, into the same language.
  static bool same_batch(const Request& a, const Request& b);
  // Whether `request` can join a continuous batch of `search`.
  bool runs_continuously(const Request& request, const SearchOptions& search) const;
  // Translates the oldest request and those that join it continuously, until none is left running
  // (mutex_ held on entry and exit).
  void run_continuously(std::unique_lock<std::mutex>& lock);
  // Answers `request` (mutex_ not held).
  void answer(Request& request, std::vector<Translation> translations, const std::exception_ptr& error);
  // Moves the requests choose_batch picks out of queue_ (mutex_ held).
  std::vector<Request> take_batch();

  const TranslationModels& models_;
  const Ensemble ensemble_;  // models_'s
  BatchQueueOptions options_;
  torch::Device device_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Request> queue_;
  bool stopping_ = false;
  size_t sentences_done_ = 0;
  std::atomic<size_t> sentences_capped_{0};
  size_t batches_done_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace nmt::serve
