// nmt serve's access log (--access-log FILE): one JSON line per request, as Envoy and nginx write
// theirs: {"time", "method", "path", "status", "request_bytes", "answer_bytes", "seconds",
// "answered", "client", "forwarded_for"}, and the texts and translations only with
// --access-log-text. The network threads only queue a line; a thread of its own writes each in one
// write(2) on a descriptor opened for appending, so that lines never interleave, and a log that
// cannot keep up (a pipe nobody reads, a slow disk) loses lines, counted, rather than holding up
// the server. Rotation: copytruncate; after a rename the server goes on writing to the renamed
// file until it restarts.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "serve/http_server.h"

namespace nmt::serve {

class AccessLog {
 public:
  // Appends to `path` ("-": standard output), creating it: mode 600 when it holds texts
  // (`private_texts`), 640 otherwise. Throws std::runtime_error naming it when it cannot be opened.
  AccessLog(const std::string& path, bool private_texts);
  // Writes the lines still queued, then closes the file.
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // From any thread, without waiting for the disk. Past kQueuedLines waiting, the line is dropped.
  void write(const HttpExchange& exchange);
  // Lines dropped so far: the queue was full, or a write failed (a full disk; warned of once).
  size_t dropped() const;

  static constexpr size_t kQueuedLines = 10000;

 private:
  void drain();  // the writer thread

  std::string path_;
  int fd_ = -1;
  bool owned_ = false;  // not standard output
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::string> lines_;
  bool stopping_ = false;
  size_t dropped_ = 0;
  std::thread writer_;
};

// The line of `exchange`, its newline included.
std::string access_log_line(const HttpExchange& exchange, double unix_seconds);

}  // namespace nmt::serve
