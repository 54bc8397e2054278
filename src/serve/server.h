// `nmt serve`: a trained model behind HTTP and JSON (cpp-httplib, nlohmann/json).
//   POST /translate  {"text": [...], "beam_size", "n_best", "attention", "alignment"} (serve/request.h)
//   GET  /health     the model, vocabulary sizes, device, uptime, requests served
//   GET  /           a page to type sentences into and see each one's attention (serve/page.html)
// Requests from all connections are translated together (serve/batch_queue.h). A connection waits
// for its request line and headers without a thread, so that clients which send part of a request
// and then nothing hold none (server.cpp, "Connections"). SIGINT or SIGTERM stops accepting
// connections, answers what is in flight, and returns; a second one exits at once.
#pragma once

#include <string>

#include "config/translate_options.h"
#include "serve/request.h"

namespace nmt::serve {

struct ServeOptions {
  TranslateOptions translate;      // the model, its checkpoint, default search, batching, threads
  std::string host = "127.0.0.1";  // the address to listen on (0.0.0.0: every interface)
  int port = 8080;                 // 0: any free port (the log says which)
  int max_batch = 64;              // sentences translated together, across requests
  double max_wait_ms = 0;          // how long a request may wait for others to join its batch
  // How greedy requests are batched: "continuous" (joining the running batch between two decoder
  // steps), "static" (whole batches, as every other search), or "auto": continuous, static with a
  // shortlist (continuous_batching()).
  std::string batching = "auto";
  int workers = 0;        // batches translated at once (each on one thread when several); 0:
                          // one per CPU thread (--threads) on the CPU, one on a GPU
  int connections = 128;  // requests read and answered at once, one thread each
  RequestLimits limits;
  // A connection waits without a thread while its request line and headers arrive, and between
  // requests (kept alive).
  int max_waiting_connections = 1000;  // connections waiting at once; past this the oldest is closed
  double header_timeout = 5;           // seconds from a request's first byte to its last header (408)
};

// Whether greedy requests are batched continuously: `batching` is "continuous", or "auto" without a
// shortlist. A continuous batch holds more sentences than a static one (it is refilled as they end),
// so its output layer, the union of their lists, is larger at every step; with a shortlist static
// batches answered 16 and 64 clients faster, without one continuous batches did
// (docs/performance.md, "Serving").
bool continuous_batching(const ServeOptions& options);

// Checks the options, loads the model, and serves until SIGINT or SIGTERM. Throws
// std::runtime_error when the address cannot be listened on.
void serve(const ServeOptions& options);

}  // namespace nmt::serve
