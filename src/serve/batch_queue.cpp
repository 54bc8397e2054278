#include "serve/batch_queue.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <utility>

#include "search/continuous.h"

namespace nmt::serve {

namespace {

bool same_search(const SearchOptions& a, const SearchOptions& b) {
  return a.beam_size == b.beam_size && a.n_best == b.n_best && a.return_attention == b.return_attention &&
         a.length_penalty == b.length_penalty && a.max_length_ratio == b.max_length_ratio &&
         a.max_length == b.max_length && a.ban_unk == b.ban_unk;
}

// One guide line (a prefix, constraints) per line of the batch when a request has them ("" for
// the lines of the others), else none.
template <typename Request>
std::vector<std::string> merged_guide(const std::vector<Request>& batch, std::vector<std::string> Request::*guide) {
  std::vector<std::string> merged;
  const bool any = std::any_of(batch.begin(), batch.end(), [&](const Request& each) { return !(each.*guide).empty(); });
  if (!any) return merged;
  for (const Request& each : batch) {
    if ((each.*guide).empty()) {
      merged.insert(merged.end(), each.lines.size(), "");
    } else {
      merged.insert(merged.end(), (each.*guide).begin(), (each.*guide).end());
    }
  }
  return merged;
}

}  // namespace

BatchQueue::BatchQueue(const TranslationModels& models, BatchQueueOptions options, torch::Device device)
    : models_(models), ensemble_(models.ensemble()), options_(options), device_(device) {
  for (size_t worker = 0; worker < std::max<size_t>(options_.workers, 1); ++worker) {
    workers_.emplace_back([this] {
      // Several workers: one thread each. OpenMP's thread count is per thread, but LibTorch sets a
      // new thread's own from a global the first time the thread asks for it: ask, then set.
      torch::get_num_threads();
      if (options_.workers > 1) torch::set_num_threads(1);
      work();
    });
  }
}

BatchQueue::~BatchQueue() { stop(); }

void BatchQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  arrived_.notify_all();
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

void BatchQueue::submit(std::vector<std::string> lines, const SearchOptions& search, std::vector<std::string> prefixes,
                        std::vector<std::string> constraints, std::vector<std::vector<int64_t>> subwords, Done done,
                        std::string target_language) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw std::runtime_error("the server is stopping");
    Request& request = queue_.emplace_back();
    request.lines = std::move(lines);
    request.prefixes = std::move(prefixes);
    request.constraints = std::move(constraints);
    request.subwords = std::move(subwords);
    request.search = search;
    request.target_language = std::move(target_language);
    request.arrival = std::chrono::steady_clock::now();
    request.done = std::move(done);
  }
  arrived_.notify_all();
}

std::vector<Translation> BatchQueue::translate(std::vector<std::string> lines, const SearchOptions& search,
                                               std::vector<std::string> prefixes, std::vector<std::string> constraints,
                                               std::vector<std::vector<int64_t>> subwords,
                                               std::string target_language) {
  std::promise<std::vector<Translation>> result;
  std::future<std::vector<Translation>> answer = result.get_future();
  submit(
      std::move(lines), search, std::move(prefixes), std::move(constraints), std::move(subwords),
      [&result](std::vector<Translation> translations, std::exception_ptr error) {
        if (error) {
          result.set_exception(error);
        } else {
          result.set_value(std::move(translations));
        }
      },
      std::move(target_language));
  return answer.get();
}

size_t BatchQueue::sentences_done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sentences_done_;
}

size_t BatchQueue::sentences_waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t sentences = 0;
  for (const Request& request : queue_) sentences += request.lines.size();
  return sentences;
}

size_t BatchQueue::batches_done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batches_done_;
}

std::vector<bool> choose_batch(const std::vector<WaitingRequest>& waiting, size_t max_sentences) {
  std::vector<bool> chosen(waiting.size(), false);
  if (waiting.empty()) return chosen;
  const double length = waiting.front().bytes_per_line;
  std::vector<size_t> nearest;  // the others that can share the oldest's batch, nearest in length first
  for (size_t i = 1; i < waiting.size(); ++i) {
    if (waiting[i].same_search) nearest.push_back(i);
  }
  std::stable_sort(nearest.begin(), nearest.end(), [&](size_t x, size_t y) {
    return std::abs(waiting[x].bytes_per_line - length) < std::abs(waiting[y].bytes_per_line - length);
  });
  chosen[0] = true;  // however many lines it has
  size_t sentences = waiting.front().lines;
  for (size_t i : nearest) {
    if (sentences + waiting[i].lines > max_sentences) continue;
    chosen[i] = true;
    sentences += waiting[i].lines;
  }
  return chosen;
}

std::vector<BatchQueue::Request> BatchQueue::take_batch() {
  std::vector<WaitingRequest> waiting;
  for (const Request& request : queue_) {
    size_t bytes = 0;
    for (const std::string& line : request.lines) bytes += line.size();
    const double per_line = request.lines.empty() ? 0.0 : static_cast<double>(bytes) / request.lines.size();
    waiting.push_back({request.lines.size(), per_line, same_batch(request, queue_.front())});
  }
  const std::vector<bool> chosen = choose_batch(waiting, options_.max_batch_sentences);
  std::vector<Request> batch;
  std::deque<Request> left;
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (chosen[i]) {
      batch.push_back(std::move(queue_[i]));
    } else {
      left.push_back(std::move(queue_[i]));
    }
  }
  queue_ = std::move(left);
  return batch;
}

int64_t BatchQueue::language_tag(const Request& request) const {
  return target_language_tag(request.target_language, ensemble_, models_.source_vocabulary());
}

bool BatchQueue::same_batch(const Request& a, const Request& b) {
  return same_search(a.search, b.search) && a.target_language == b.target_language;
}

bool BatchQueue::runs_continuously(const Request& request, const SearchOptions& search) const {
  return options_.continuous && request.prefixes.empty() && request.constraints.empty() && !request.lines.empty() &&
         request.lines.size() <= options_.max_batch_sentences && same_search(request.search, search) &&
         ContinuousGreedy::supports(ensemble_, request.search, device_);
}

void BatchQueue::answer(Request& request, std::vector<Translation> translations, const std::exception_ptr& error) {
  if (error) translations.clear();
  for (const Translation& translation : translations) sentences_capped_ += translation.capped.size();
  request.done(std::move(translations), error);
}

void BatchQueue::run_continuously(std::unique_lock<std::mutex>& lock) {
  struct Running {
    Request request;
    std::vector<Translation> translations;
    size_t left = 0;  // sentences still in the search
  };
  const SearchOptions search = queue_.front().search;
  const Vocabulary& source_vocabulary = models_.source_vocabulary();
  const Vocabulary& target_vocabulary = models_.target_vocabulary();
  const bool backwards = ensemble_.members().front()->options().reverse_target;
  ContinuousGreedy running(ensemble_, search, models_.shortlist);
  // The requests in the search by number; a sentence's tag is its request's number and its line.
  std::map<int64_t, Running> requests;
  int64_t next_number = 0;
  const auto lines_per_request = static_cast<int64_t>(options_.max_batch_sentences);  // at most
  const JoinPolicy policy{options_.max_batch_sentences};
  size_t steps_waited = 0;  // by the oldest request that could join
  while (true) {
    // Between two steps (mutex_ held): the oldest waiting requests join, while they fit.
    size_t fitting = 0, sentences = running.size();
    for (const Request& request : queue_) {
      if (!runs_continuously(request, search) || sentences + request.lines.size() > options_.max_batch_sentences) break;
      sentences += request.lines.size();
      ++fitting;
    }
    const bool join = policy.join(running.size(), sentences - running.size(), steps_waited);
    std::vector<Request> joining;
    for (size_t i = 0; join && i < fitting; ++i) {
      joining.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    steps_waited = fitting > 0 && !join ? steps_waited + 1 : 0;
    if (joining.empty() && running.size() == 0) return;
    if (!joining.empty()) ++batches_done_;
    lock.unlock();

    std::vector<Running> done;
    std::exception_ptr error;
    try {
      torch::InferenceMode inference_mode;
      std::vector<std::vector<int64_t>> sources;
      std::vector<int64_t> tags;
      std::vector<int64_t> numbers;
      for (Request& request : joining) {  // first all in `requests`, so that an error reaches each
        numbers.push_back(next_number++);
        requests[numbers.back()].request = std::move(request);
      }
      for (const int64_t number : numbers) {
        Running& each = requests.at(number);
        const std::vector<std::string>& lines = each.request.lines;
        each.translations.resize(lines.size());
        const int64_t tag = language_tag(each.request);  // requests into several languages share the search
        for (size_t line = 0; line < lines.size(); ++line) {
          Translation& translation = each.translations[line];
          std::vector<int64_t> ids =
              each.request.subwords.empty()
                  ? source_ids(lines[line], source_vocabulary, translation, tag)
                  : source_ids(std::move(each.request.subwords[line]), source_vocabulary, translation, tag);
          if (ids.empty()) continue;  // empty in, empty out
          sources.push_back(std::move(ids));
          tags.push_back(number * lines_per_request + static_cast<int64_t>(line));
          ++each.left;
        }
      }
      running.add(sources, tags);
      if (!joining.empty() && options_.on_batch) options_.on_batch(running.size());
      for (ContinuousGreedy::Ended& ended : running.step()) {
        Running& each = requests.at(ended.tag / lines_per_request);
        each.translations[static_cast<size_t>(ended.tag % lines_per_request)].hypotheses.push_back(
            std::move(ended.hypothesis));
        --each.left;
      }
      for (auto each = requests.begin(); each != requests.end();) {  // answered as soon as all its lines end
        if (each->second.left > 0) {
          ++each;
          continue;
        }
        for (size_t line = 0; line < each->second.translations.size(); ++line) {
          finish_translation(each->second.translations[line], each->second.request.lines[line], target_vocabulary,
                             search, backwards);
        }
        done.push_back(std::move(each->second));
        each = requests.erase(each);
      }
    } catch (...) {
      error = std::current_exception();
      for (auto& [number, each] : requests) done.push_back(std::move(each));
      requests.clear();
    }
    lock.lock();  // counted before any client has its answer, so that /health never lags behind it
    if (!error) {
      for (const Running& each : done) sentences_done_ += each.request.lines.size();
    }
    lock.unlock();
    for (Running& each : done) answer(each.request, std::move(each.translations), error);
    lock.lock();
    if (error) return;
  }
}

void BatchQueue::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    arrived_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to translate
    if (runs_continuously(queue_.front(), queue_.front().search)) {
      run_continuously(lock);
      continue;
    }
    // Wait for company while the oldest request is young and the batch not yet full.
    const auto deadline = queue_.front().arrival + options_.max_wait;
    arrived_.wait_until(lock, deadline, [this] {
      if (stopping_ || queue_.empty()) return true;
      size_t sentences = 0;
      for (const Request& request : queue_) {
        if (same_batch(request, queue_.front())) sentences += request.lines.size();
      }
      return sentences >= options_.max_batch_sentences;
    });
    std::vector<Request> batch = take_batch();
    if (batch.empty()) continue;  // another worker took them
    lock.unlock();

    std::vector<std::string> lines;
    for (const Request& request : batch) lines.insert(lines.end(), request.lines.begin(), request.lines.end());
    // The lines' subwords when every request brought them, so that none is encoded again.
    std::vector<std::vector<int64_t>> subwords;
    const auto brought = [](const Request& request) { return request.subwords.size() == request.lines.size(); };
    if (std::all_of(batch.begin(), batch.end(), brought)) {
      for (Request& request : batch) {
        for (std::vector<int64_t>& ids : request.subwords) subwords.push_back(std::move(ids));
      }
    }
    TargetGuides guides;
    guides.prefixes.lines = merged_guide(batch, &Request::prefixes);
    guides.constraints.lines = merged_guide(batch, &Request::constraints);
    std::vector<Translation> translations;
    std::exception_ptr error;
    try {
      // Lines arrive already split into sentences (serve/server.cpp, answer_translate).
      TextOptions text = whole_lines();
      text.target_language = batch.front().target_language;  // the same for the batch (same_batch)
      Translator translator(ensemble_, models_.source_vocabulary(), models_.target_vocabulary(), batch.front().search,
                            options_.batching, text, device_, models_.shortlist);
      if (options_.on_batch) options_.on_batch(lines.size());
      translations = translator.translate(lines, {}, guides, std::move(subwords));
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();  // counted before any client has its answer, so that /health never lags behind it
    if (!error) sentences_done_ += lines.size();
    ++batches_done_;
    lock.unlock();
    size_t next = 0;
    for (Request& request : batch) {
      std::vector<Translation> own;
      if (!error) {
        own.assign(std::make_move_iterator(translations.begin() + next),
                   std::make_move_iterator(translations.begin() + next + request.lines.size()));
        next += request.lines.size();
      }
      answer(request, std::move(own), error);
    }
    lock.lock();
  }
}

}  // namespace nmt::serve
