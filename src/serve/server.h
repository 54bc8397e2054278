// `nmt serve`: a trained model behind HTTP and JSON (Boost.Beast, nlohmann/json).
//   POST /translate  {"text": [...], "beam_size", "n_best", "attention", "alignment"} (serve/request.h),
//                    with Content-Type: application/json
//   GET  /health     the model, vocabulary sizes, device, uptime, requests served
//   GET  /ready      200 while new requests are taken, 503 while full or stopping (for a load balancer)
//   GET  /metrics    counters and histograms in Prometheus' text format (serve/metrics.h)
//   GET  /           a page to type sentences into and see each one's attention (serve/page.html)
// With --api-key-file, /translate and /metrics need a key (serve/access.h); --allow-origin grants
// pages on other sites CORS; --access-log writes a line per request (serve/access_log.h).
// Requests from all connections are translated together (serve/batch_queue.h). Connections hold
// no thread while they wait for a request, its body or its translation, and every limit holds
// whatever a client sends (serve/http_server.h). SIGINT or SIGTERM stops accepting connections,
// answers what is in flight, and returns; a second one exits at once.
#pragma once

#include <string>
#include <vector>

#include "config/translate_options.h"
#include "serve/request.h"

namespace nmt::serve {

struct ServeOptions {
  TranslateOptions translate;      // the model, its checkpoint, default search, batching, threads
  std::string host = "127.0.0.1";  // the address to listen on (0.0.0.0: every interface)
  // Host header names answered besides an address, the loopback names and `host` (host_allowed);
  // "*": any.
  std::vector<std::string> allow_hosts;
  std::string api_key_file;                // "": no key needed
  std::vector<std::string> allow_origins;  // CORS: origins, or "*"; none: no CORS fields
  std::string access_log;                  // "": none; "-": standard output
  bool access_log_text = false;            // texts and translations in the access log too
  int port = 8080;                         // 0: any free port (the log says which)
  int max_batch = 64;                      // sentences translated together, across requests
  double max_wait_ms = 0;                  // how long a request may wait for others to join its batch
  // How greedy requests are batched: "continuous" (joining the running batch between two decoder
  // steps), "static" (whole batches, as every other search), or "auto": continuous, static with a
  // shortlist (continuous_batching()).
  std::string batching = "auto";
  int workers = 0;        // batches translated at once (each on one thread when several); 0:
                          // one per CPU thread (--threads) on the CPU, one on a GPU
  int connections = 128;  // requests being translated and answered at once; past this, 503
  RequestLimits limits;
  // Connections in any state but being translated (waiting for a request, its headers or its
  // body, having their answer written, closing); past this the oldest is closed.
  int max_waiting_connections = 1000;
  double header_timeout = 5;     // seconds from a request's first byte to its last header (408)
  double request_timeout = 30;   // seconds from a request's first byte to its body's last (408)
  double answer_timeout = 30;    // at most, to write a whole answer (then the connection is dropped)
  double min_send_rate = 65536;  // bytes a second an answer is written at, at least, after 2 s
  // MiB of what connections hold at once: their headers, bodies and answers being written (past it
  // the connection that has made the least progress is closed, or 503).
  size_t max_body_memory = 64;
};

// Whether a request's Host header (`host`, as sent: "name", "name:port", "[v6]:port", or empty)
// names this server: an IP address (a page's DNS name can be made to point at 127.0.0.1, an
// address cannot), localhost or a name under .localhost, the --host it listens on, or one of
// `allowed` ("*": every name). A page on another site can reach a server on loopback by DNS
// rebinding; its requests carry that site's name, and are refused with 421.
bool host_allowed(const std::string& host, const std::string& listening, const std::vector<std::string>& allowed);

// Whether greedy requests are batched continuously: `batching` is "continuous", or "auto" without a
// shortlist. A continuous batch holds more sentences than a static one (it is refilled as they end),
// so its output layer, the union of their lists, is larger at every step; with a shortlist static
// batches answered 16 and 64 clients faster, without one continuous batches did
// (docs/benchmarks.md, "Serving").
bool continuous_batching(const ServeOptions& options);

// Checks the options, loads the model, and serves until SIGINT or SIGTERM. Throws
// std::runtime_error when the address cannot be listened on.
void serve(const ServeOptions& options);

}  // namespace nmt::serve
