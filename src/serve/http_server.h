// The HTTP/1.1 side of nmt serve, on Boost.Beast and Asio, built for clients that are hostile as
// well as for those that are slow by accident (nginx and Envoy hold the same limits):
//   - every body is bounded before it is stored, whatever its framing: a Content-Length over the
//     limit is refused from the headers, a chunked body when its decoded bytes pass it; compressed
//     bodies (Content-Encoding, or a Transfer-Encoding other than chunked) are refused, never
//     inflated;
//   - one memory budget for what connections hold: their read buffers (headers), their bodies as
//     the bytes arrive (an announced length reserves nothing) and the answers being written. Past
//     it the connection that has made the least progress (bytes a second) is closed to make room,
//     and 503 when none holds any (a phase under a second old is spared while older ones remain). Only the headers the
//     server reads are kept, and at most max_header_fields of them are accepted;
//   - deadlines for a request's headers (from its first byte), for the whole request (headers and
//     body), for an answer (a minimum send rate, within answer_seconds), and for the first byte of
//     a kept-alive connection's next request;
//   - a cap on connections in any state but being handled (waiting for a request, its headers or
//     its body, having their answer written, draining after a refusal: past it the one that has
//     waited longest is closed) and on requests being handled at once (past it, 503); the two
//     together are the descriptors connections can hold;
//   - no thread per connection, and none of the network threads parses a body: requests with one
//     are handed to a small worker pool, bodies over 64 KiB to a worker of their own (a JSON
//     megabyte holds up neither /health nor a small request).
// The routes and what a request means are the caller's (serve/server.cpp); this file knows nothing
// of translation.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nmt::serve {

struct HttpLimits {
  size_t max_head_bytes = 64 * 1024;  // request line and headers (431 past it)
  size_t max_header_fields = 100;     // header fields in one request (431 past it)
  size_t max_body_bytes = 1 << 20;    // one body, decoded from its framing (413 past it)
  // Read buffers, bodies and answers being written, all connections: past it the connections
  // that have made the least progress are closed, and 503 when none is left to close.
  size_t max_memory = size_t{64} << 20;
  size_t max_waiting = 1000;    // connections in any state but being handled (the oldest closed past it)
  size_t max_answering = 128;   // requests being handled at once (503 past it)
  size_t max_requests = 1000;   // answered on one kept-alive connection
  double idle_seconds = 2;      // for the first byte of a kept-alive connection's next request
  double header_seconds = 5;    // from a request's first byte to its blank line (408)
  double request_seconds = 30;  // from a request's first byte to the last byte of its body (408)
  // An answer is written within 2 s plus its size at min_send_rate bytes a second, and at most
  // answer_seconds; a client that reads slower is dropped.
  double min_send_rate = 64 * 1024;
  double answer_seconds = 30;
  // Running the connections, and as many workers handling requests with a body of up to 64 KiB
  // (one more takes larger bodies).
  size_t threads = 2;
};

struct HttpRequest {
  std::string method;         // as sent: "GET", "POST", ...
  std::string path;           // the target without its query
  std::string content_type;   // the header's value, or ""
  std::string host;           // the Host header's value, or ""
  std::string authorization;  // the Authorization header's value, or ""
  std::string origin;         // the Origin header's value (a browser's page elsewhere), or ""
  std::string body;           // empty until the whole request is in
};

struct HttpAnswer {
  HttpAnswer(int status = 200, std::string content_type = "application/json", std::string body = "")
      : status(status), content_type(std::move(content_type)), body(std::move(body)) {}

  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // More header fields, name and value (a line break in either never reaches the wire).
  std::vector<std::pair<std::string, std::string>> headers;
  // What the access log adds to this request's line: a JSON object's members, or "" (opaque here).
  std::string log_fields;
};

// One request and its answer, once the answer is written or its connection failed while writing
// it: what an access log and the metrics need. A connection closed before its request was whole
// has none.
struct HttpExchange {
  std::string method, path;  // "" when the request line never arrived whole
  int status = 0;
  size_t request_bytes = 0;   // the body's, as decoded from its framing
  size_t answer_bytes = 0;    // written: status line, headers and body
  bool answered = false;      // the whole answer was written
  double seconds = 0;         // from the request's first byte to the answer's last (or the failure)
  std::string client;         // the peer's address
  std::string forwarded_for;  // the X-Forwarded-For header as sent (a proxy's), at most 256 bytes, or ""
  std::string log_fields;     // the answer's
};

// Gives a request's answer: callable once, from any thread.
using Respond = std::function<void(HttpAnswer answer)>;

struct HttpRoutes {
  // For a request whose headers are in (body still empty): an answer that refuses it before its
  // body is read (401, 404, 405, 415, 421), or none. A refusal closes the connection.
  std::function<std::optional<HttpAnswer>(const HttpRequest& head)> refuse;
  // A whole request: answers it through `respond`, now or later. Called on a network thread for a
  // request without a body (nothing of the client's to parse), on a worker otherwise. An
  // exception it throws becomes a 500 with its message.
  std::function<void(HttpRequest request, Respond respond)> answer;
  // A request this file refused itself (408, 413, 415, 431, 503, a malformed request): for counting.
  std::function<void()> refused;
  // Every exchange, on a network thread (it must not block): for the access log and the metrics.
  std::function<void(const HttpExchange& exchange)> done;
};

// Text a client sent, for a message: at most `limit` bytes, other than printable ASCII as '?', and
// "..." when cut. Messages never echo more of what they refuse.
std::string printable(std::string_view text, size_t limit = 60);

// A header value's first token: before any ';', trimmed, lowercased ("application/json" of
// "Application/JSON; charset=utf-8").
std::string header_token(std::string_view value);

// {"error": message}, with the message a JSON string. The server's own refusals use it too.
std::string error_body(const std::string& message);

class HttpServer {
 public:
  HttpServer(HttpLimits limits, HttpRoutes routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on host:port (0: any free port) and returns the port. Throws std::runtime_error naming
  // the address when it cannot.
  int listen(const std::string& host, int port);
  // Serves until stop(), then until every request whose headers were in has been answered.
  void run();
  // From any thread (not a signal handler: it allocates): no new connections; connections waiting
  // for a request or its headers are closed; the others get their answer with "Connection: close".
  void stop();
  // Requests being handled now (their answers not yet built): at max_answering, new ones get 503.
  size_t answering() const;
  // Whether stop() has been called.
  bool stopping() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // keeps Asio out of this header
};

// Each connection holds a descriptor, and the soft limit is often 1024: it is raised toward the
// hard limit so that `waiting` connections and `answering` requests fit beside the model's files;
// where they cannot, fewer connections wait (the oldest are closed sooner), so that accept() does
// not run out of descriptors. Returns how many may wait.
size_t waiting_connections_that_fit(size_t waiting, size_t answering);

}  // namespace nmt::serve
