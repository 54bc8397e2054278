// The HTTP server of nmt serve (serve/server.h). serve() goes in steps: load the model (Service),
// configure the server, add the routes and error handlers, bind, and listen until a signal.
#include "serve/server.h"

#include <httplib.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "inference/model.h"
#include "search/memory.h"
#include "serve/batch_queue.h"
#include "serve/connections.h"
#include "serve/page.h"
#include "util/runtime.h"

namespace nmt::serve {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kJson = "application/json";

// SIGINT and SIGTERM reach the server through a pipe: the handler only writes to it (all a signal
// handler may safely do), and a thread of the server reads it and stops the listener.
int signal_pipe[2] = {-1, -1};
std::atomic<int> signals_received{0};

void on_signal(int number) {
  if (signals_received.fetch_add(1) > 0) {
    constexpr char kMessage[] = "nmt serve: second signal: exiting without finishing the requests in flight\n";
    [[maybe_unused]] ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    ::_exit(1);
  }
  const char byte = static_cast<char>(number);
  [[maybe_unused]] ssize_t written = ::write(signal_pipe[1], &byte, 1);
}

void install_signal_handlers() {
  if (::pipe(signal_pipe) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

void check(const ServeOptions& options) {
  validate(options.translate.search);
  validate(options.translate.batching);
  if (options.port < 0 || options.port > 65535) throw std::invalid_argument("--port must be from 0 to 65535");
  if (options.max_batch < 1) throw std::invalid_argument("--max-batch must be at least 1");
  if (options.batching != "auto" && options.batching != "continuous" && options.batching != "static") {
    throw std::invalid_argument("--batching " + options.batching + ": auto, continuous or static");
  }
  if (options.workers < 0 || options.workers > 256) {
    throw std::invalid_argument("--workers must be from 0 (one per CPU thread) to 256");
  }
  if (!(options.max_wait_ms >= 0 && options.max_wait_ms <= 10000)) {
    throw std::invalid_argument("--max-wait-ms must be from 0 to 10000");
  }
  if (options.connections < 1 || options.connections > 4096) {
    throw std::invalid_argument("--connections must be from 1 to 4096");
  }
  if (options.max_waiting_connections < 1 || options.max_waiting_connections > 65536) {
    throw std::invalid_argument("--max-waiting-connections must be from 1 to 65536");
  }
  if (!(options.header_timeout > 0 && options.header_timeout <= 3600)) {
    throw std::invalid_argument("--header-timeout must be more than 0 and at most 3600 seconds");
  }
  const RequestLimits& limits = options.limits;
  if (limits.max_body_bytes < 16) throw std::invalid_argument("--max-body-bytes must be at least 16");
  if (limits.max_sentences < 1) throw std::invalid_argument("--max-sentences must be at least 1");
  if (limits.max_sentence_bytes < 1) throw std::invalid_argument("--max-sentence-bytes must be at least 1");
  if (limits.max_beam_size < options.translate.search.beam_size) {
    throw std::invalid_argument("--max-beam-size must be at least --beam-size (" +
                                std::to_string(options.translate.search.beam_size) + ")");
  }
}

void answer_json(httplib::Response& response, int status, const json& body) {
  response.status = status;
  response.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), kJson);
}

void answer_error(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_content(error_json(message), kJson);
}

// What the handlers read and count: lives in serve() for as long as the server runs.
struct Service {
  Service(const ServeOptions& options, const TranslationModels& models, torch::Device device);

  const ServeOptions& options;
  const TranslationModels& models;
  const torch::Device device;
  std::string model_dirs, checkpoint;  // ", "-joined for an ensemble
  int threads = 0;
  Clock::time_point started;
  std::atomic<size_t> requests_served{0};
  std::atomic<size_t> requests_refused{0};
  BatchQueue queue;
};

std::string joined_model_dirs(const TranslateOptions& options) {
  std::string model_dirs;
  for (const auto& [model_dir, which] : model_checkpoints(options)) {
    model_dirs += (model_dirs.empty() ? "" : ", ") + model_dir;
  }
  return model_dirs;
}

std::string joined_checkpoints(const TranslationModels& models) {
  std::string checkpoint;
  for (const std::string& path : models.checkpoints) checkpoint += (checkpoint.empty() ? "" : ", ") + path;
  return checkpoint;
}

// --workers 0: one worker per CPU thread (--threads), each on one thread; one on a GPU.
size_t worker_count(const ServeOptions& options, const torch::Device& device) {
  if (options.workers > 0) return static_cast<size_t>(options.workers);
  return device.is_cpu() ? static_cast<size_t>(std::clamp(torch::get_num_threads(), 1, 256)) : 1;
}

BatchQueueOptions batch_queue_options(const ServeOptions& options, const torch::Device& device) {
  BatchQueueOptions queue_options;
  queue_options.max_batch_sentences = static_cast<size_t>(options.max_batch);
  queue_options.workers = worker_count(options, device);
  queue_options.max_wait = std::chrono::microseconds(static_cast<int64_t>(options.max_wait_ms * 1000));
  queue_options.batching = options.translate.batching;
  queue_options.continuous = continuous_batching(options);
  return queue_options;
}

Service::Service(const ServeOptions& options, const TranslationModels& models, torch::Device device)
    : options(options),
      models(models),
      device(device),
      model_dirs(joined_model_dirs(options.translate)),
      checkpoint(joined_checkpoints(models)),
      threads(torch::get_num_threads()),
      started(Clock::now()),
      queue(models, batch_queue_options(options, device), device) {}

// Limits, timeouts and the listening socket (written to `listening` when it is made); the
// connections themselves are HttpServer's.
void configure(httplib::Server& server, const ServeOptions& options, socket_t& listening) {
  server.set_payload_max_length(options.limits.max_body_bytes);
  // httplib's default adds SO_REUSEPORT, with which a second server on the same port would share
  // its connections instead of being refused: SO_REUSEADDR alone.
  server.set_socket_options([&listening](socket_t socket) {
    const int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening = socket;
  });
  server.set_tcp_nodelay(true);  // answers are small: send them now, not after the client's ACK
  server.set_keep_alive_max_count(1000);
  server.set_keep_alive_timeout(2);  // how long an idle connection waits for a request
  server.set_read_timeout(5);        // a client that stops sending a body is dropped after this
  server.set_write_timeout(5);
}

// GET /health.
void answer_health(const Service& service, httplib::Response& response) {
  const double uptime = std::chrono::duration<double>(Clock::now() - service.started).count();
  answer_json(response, 200,
              {{"status", "ok"},
               {"model", service.model_dirs},
               {"checkpoint", service.checkpoint},
               {"attention", service.models.attention()},
               {"source_vocabulary", service.models.source_vocabulary().size()},
               {"target_vocabulary", service.models.target_vocabulary().size()},
               {"device", service.device.str()},
               {"threads", service.threads},
               {"workers", service.queue.workers()},
               {"beam_size", service.options.translate.search.beam_size},
               {"compute_type", service.models.compute_type},
               {"shortlist", service.options.translate.shortlist},
               {"continuous_batching", continuous_batching(service.options)},
               {"uptime_seconds", uptime},
               {"requests_served", service.requests_served.load()},
               {"requests_refused", service.requests_refused.load()},
               {"sentences_translated", service.queue.sentences_done()},
               {"batches", service.queue.batches_done()}});
}

// Refuses a request with a sentence whose search alone would hold more than --max-search-memory
// (search/memory.h), before it joins a batch that other requests share.
void check_search_memory(const Service& service, const TranslateRequest& request,
                         const std::vector<std::vector<int64_t>>& source_subwords) {
  const int64_t bound = int64_t{service.options.translate.batching.max_search_memory} << 20;
  const Ensemble model = service.models.ensemble();
  for (size_t i = 0; i < request.text.size(); ++i) {
    const auto length = static_cast<int64_t>(source_subwords[i].size()) + 1;
    const int64_t bytes =
        sentence_search_bytes(model, length, service.models.target_vocabulary().size(), request.search);
    if (bytes > bound) {
      throw RequestError(413, "text[" + std::to_string(i) + "] (" + std::to_string(length) + " subwords) needs about " +
                                  std::to_string((bytes >> 20) + 1) + " MiB for its search at beam_size " +
                                  std::to_string(request.search.beam_size) +
                                  ", more than the server's --max-search-memory " +
                                  std::to_string(service.options.translate.batching.max_search_memory) +
                                  ": send a shorter sentence or a smaller beam_size");
    }
  }
}

// POST /translate.
void answer_translate(Service& service, const httplib::Request& http_request, httplib::Response& response) {
  const ServeOptions& options = service.options;
  try {
    TranslateRequest request = parse_translate_request(http_request.body, options.translate.search, options.limits);
    if (request.search.return_attention && !service.models.has_attention()) {
      throw RequestError(400, "attention/alignment: this model was trained with attention none");
    }
    std::vector<std::vector<int64_t>> subwords;  // encoded once: checked here, translated by the queue
    for (const std::string& text : request.text) subwords.push_back(service.models.source_vocabulary().encode(text));
    check_search_memory(service, request, subwords);
    check_guides(request, subwords, service.models.target_vocabulary(),
                 service.models.ensemble().members().front()->options().reverse_target);
    const std::vector<Translation> translations =
        request.text.empty() ? std::vector<Translation>{}
                             : service.queue.translate(request.text, request.search, request.prefix,
                                                       request.constraints, std::move(subwords));
    answer_json(response, 200, translations_json(request, translations, service.models.target_vocabulary()));
    ++service.requests_served;
  } catch (const RequestError& error) {
    ++service.requests_refused;
    answer_error(response, error.status(), error.what());
  }
}

// The endpoints, and the same endpoints with the wrong method.
void add_routes(httplib::Server& server, Service& service) {
  server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(page_html(), "text/html; charset=utf-8");
  });
  server.Get("/health",
             [&service](const httplib::Request&, httplib::Response& response) { answer_health(service, response); });
  server.Post("/translate", [&service](const httplib::Request& http_request, httplib::Response& response) {
    answer_translate(service, http_request, response);
  });
  for (const char* path : {"/", "/health"}) {
    server.Post(path, [path](const httplib::Request&, httplib::Response& response) {
      answer_error(response, 405, std::string(path) + " takes GET");
    });
  }
  server.Get("/translate", [](const httplib::Request&, httplib::Response& response) {
    answer_error(response, 405, "/translate takes POST with a JSON body like {\"text\": [\"...\"]}");
  });
}

// The message of a status httplib answered without a body of ours.
std::string http_error_message(const httplib::Request& request, const httplib::Response& response,
                               const ServeOptions& options) {
  std::string message = "HTTP " + std::to_string(response.status);
  if (response.status == 404) {
    message = "no such endpoint: " + request.method + " " + request.path +
              " (the endpoints are GET /, GET /health and POST /translate)";
  } else if (response.status == 413 &&
             request.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
    // httplib's own limit for form bodies (what curl -d sends without -H).
    message =
        "a body sent as application/x-www-form-urlencoded is limited to 8192 bytes: send it with "
        "Content-Type: application/json";
  } else if (response.status == 413) {
    message = "the body is over the limit of " + std::to_string(options.limits.max_body_bytes) +
              " bytes (nmt serve --max-body-bytes)";
  } else if (response.status == 400) {
    message = "malformed HTTP request";
  }
  return message;
}

// An exception out of a handler: a 500 with its message.
void answer_exception(httplib::Response& response, std::exception_ptr error) {
  std::string message = "internal error";
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& exception) {
    const std::string what = exception.what_without_backtrace();
    message = what.substr(0, what.find('\n'));
  } catch (const std::exception& exception) {
    message = exception.what();
  } catch (...) {
  }
  spdlog::error("POST /translate failed: {}", message);
  answer_error(response, 500, message);
}

void add_error_handlers(httplib::Server& server, Service& service) {
  // Statuses without a body of ours (an unknown path, a body over the limit, a malformed request
  // line) get a JSON error too.
  server.set_error_handler([&service](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    ++service.requests_refused;
    answer_error(response, response.status, http_error_message(request, response, service.options));
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
    answer_exception(response, std::move(error));
  });
}

// Binds to options.host and options.port (any free port for 0) and returns the port.
int bind_address(httplib::Server& server, const ServeOptions& options) {
  int port = options.port;
  const bool bound =
      port == 0 ? (port = server.bind_to_any_port(options.host)) > 0 : server.bind_to_port(options.host, options.port);
  if (!bound) {
    throw std::runtime_error("cannot listen on " + options.host + ":" + std::to_string(options.port) +
                             " (the port is in use, or the address is not one of this machine's): choose another "
                             "--port or --host");
  }
  return port;
}

// Serves until the first SIGINT or SIGTERM, then until every accepted connection is answered.
void listen_until_signal(httplib::Server& server) {
  std::atomic<bool> finished{false};
  std::thread stopper([&] {
    char byte = 0;
    while (::read(signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    if (finished) return;
    spdlog::info("SIG{}: no new connections; answering the requests in flight, then exiting", sigabbrev_np(byte));
    // listen_after_bind may not have started yet: stop() acts on a running server only.
    while (!finished) {
      if (server.is_running()) {
        server.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  server.listen_after_bind();  // returns after stop(), once every accepted connection is answered
  finished = true;
  const char wake = 0;
  [[maybe_unused]] ssize_t written = ::write(signal_pipe[1], &wake, 1);
  stopper.join();
}

// --max-beam-size beyond the tokens the model can produce: no request could fill such a beam.
void check_beam_fits(const ServeOptions& options, const TranslationModels& models) {
  const int64_t largest = largest_beam(models.target_vocabulary().size(), options.translate.search);
  if (options.limits.max_beam_size > largest) {
    throw std::invalid_argument("--max-beam-size " + std::to_string(options.limits.max_beam_size) +
                                " is larger than the " + std::to_string(largest) +
                                " tokens the model can produce, so no beam can be filled: use at most " +
                                std::to_string(largest));
  }
}

}  // namespace

bool continuous_batching(const ServeOptions& options) {
  return options.batching == "continuous" || (options.batching == "auto" && options.translate.shortlist.empty());
}

void serve(const ServeOptions& options) {
  check(options);
  install_signal_handlers();
  set_threads(options.translate.threads);
  const torch::Device device = parse_device(options.translate.device);
  const TranslationModels models = load_models(options.translate, device);
  check_beam_fits(options, models);
  Service service(options, models, device);

  ConnectionOptions connections;
  connections.threads = static_cast<size_t>(options.connections);
  connections.max_waiting = waiting_connections_that_fit(static_cast<size_t>(options.max_waiting_connections),
                                                         static_cast<size_t>(options.connections));
  connections.header_timeout_seconds = options.header_timeout;
  connections.on_refused = [&service] { ++service.requests_refused; };
  HttpServer server(std::move(connections));
  socket_t listening = -1;
  configure(server, options, listening);
  add_routes(server, service);
  add_error_handlers(server, service);
  const int port = bind_address(server, options);
  // httplib listens with a backlog of 5 connections: more clients connecting at once would see
  // their connection attempts dropped and retried a second later. Linux takes a second listen()
  // on the bound socket as a new backlog.
  if (::listen(listening, SOMAXCONN) != 0) spdlog::warn("listen backlog: {}", std::strerror(errno));
  spdlog::info("nmt serve: {} ({} attention, {} and {} subwords) on {}", service.checkpoint, models.attention(),
               models.source_vocabulary().size(), models.target_vocabulary().size(), device.str());
  spdlog::info("listening on http://{}:{}/", options.host, port);

  listen_until_signal(server);
  spdlog::info("stopped: {} served, {} refused; {} sentences translated in {} batches", service.requests_served.load(),
               service.requests_refused.load(), service.queue.sentences_done(), service.queue.batches_done());
}

}  // namespace nmt::serve
