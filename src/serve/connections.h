// The connections of nmt serve. httplib's own pool gives each accepted connection a thread, which
// then waits for the request line and headers up to the read timeout per recv(): 200 connections
// that sent "POST /translate HTTP/1.1\r\nHost: x\r\n" and then nothing held all 128 threads, and a
// real request beside them was answered after 7 s (docs/faults.md). Here a connection waits without
// a thread, in one poll() loop, until its request line and headers are in whole (and so does a
// kept-alive connection between its requests); only then does one of the threads read the body,
// translate through the batch queue and answer. A waiting connection costs a descriptor and the
// bytes read so far: their number is capped (past it the oldest is closed) and each has a deadline.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <functional>

namespace nmt::serve {

struct ConnectionOptions {
  size_t threads = 128;               // requests read and answered at once
  size_t max_waiting = 1000;          // connections waiting for a request's headers
  double header_timeout_seconds = 5;  // from a request's first byte to its blank line
  // For the first byte of a request (keep-alive).
  std::chrono::steady_clock::duration idle_timeout = std::chrono::seconds(2);
  size_t max_requests = 1000;        // answered on one connection (keep-alive)
  int read_timeout_ms = 5000;        // per recv() of a body
  int write_timeout_ms = 5000;       // per send() of an answer
  std::function<void()> on_refused;  // a waiting connection was answered 408 or 431
};

class ConnectionQueue;

// httplib::Server whose accepted connections go to a ConnectionQueue instead of its thread pool.
class HttpServer final : public httplib::Server {
 public:
  explicit HttpServer(ConnectionOptions options);

 private:
  // From the accept loop, through ConnectionQueue::enqueue.
  bool process_and_close_socket(socket_t socket) override;

  ConnectionOptions options_;
  ConnectionQueue* queue_ = nullptr;  // made and owned by listen_after_bind
};

// Each waiting connection holds a descriptor, and the soft limit is often 1024: it is raised toward
// the hard limit so that the waiting connections and those being answered fit beside the model's
// files; where they cannot, fewer connections wait (the oldest are closed sooner), so that accept()
// does not run out of descriptors. `answering`: the connections answered at once (--connections).
size_t waiting_connections_that_fit(size_t wanted, size_t answering);

}  // namespace nmt::serve
