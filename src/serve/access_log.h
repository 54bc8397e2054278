// nmt serve's access log (--access-log FILE): one JSON line per request, as Envoy and nginx write
// theirs: {"time", "method", "path", "status", "request_bytes", "answer_bytes", "seconds",
// "answered", "client", "forwarded_for"}, and the texts and translations only with
// --access-log-text. Each line goes to the file in one write(2) on a descriptor opened for
// appending, so that lines from the server's threads never interleave and log rotation by rename
// and copytruncate both work.
#pragma once

#include <atomic>
#include <string>

#include "serve/http_server.h"

namespace nmt::serve {

class AccessLog {
 public:
  // Appends to `path` ("-": standard output), creating it (mode 640). Throws std::runtime_error
  // naming it when it cannot be opened.
  explicit AccessLog(const std::string& path);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // From any thread. A failed write (a full disk) is warned of once; the server goes on.
  void write(const HttpExchange& exchange);

 private:
  std::string path_;
  int fd_ = -1;
  bool owned_ = false;  // not standard output
  std::atomic<bool> warned_{false};
};

// The line of `exchange`, its newline included.
std::string access_log_line(const HttpExchange& exchange, double unix_seconds);

}  // namespace nmt::serve
