// The routes of nmt serve (serve/server.h); the connections are serve/http_server.h's. serve()
// goes in steps: load the model (Service), make the routes, listen, and serve until a signal.
#include "serve/server.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "inference/commands.h"
#include "inference/model.h"
#include "search/memory.h"
#include "serve/access.h"
#include "serve/access_log.h"
#include "serve/batch_queue.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/page.h"
#include "util/device_rules.h"
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
  const auto check_seconds = [](double value, const char* name) {
    if (!(value > 0 && value <= 3600)) {
      throw std::invalid_argument(std::string(name) + " must be more than 0 and at most 3600 seconds");
    }
  };
  check_seconds(options.header_timeout, "--header-timeout");
  check_seconds(options.request_timeout, "--request-timeout");
  check_seconds(options.answer_timeout, "--answer-timeout");
  if (!(options.min_send_rate >= 1 && options.min_send_rate <= 1e12)) {
    throw std::invalid_argument("--min-send-rate must be from 1 to 1e12 bytes a second");
  }
  if (options.max_body_memory < 1 || options.max_body_memory > (size_t{1} << 20)) {
    throw std::invalid_argument("--max-body-memory must be from 1 to 1048576 MiB");
  }
  const RequestLimits& limits = options.limits;
  if (limits.max_body_bytes < 16) throw std::invalid_argument("--max-body-bytes must be at least 16");
  if (limits.max_sentences < 1) throw std::invalid_argument("--max-sentences must be at least 1");
  if (limits.max_sentence_bytes < 1) throw std::invalid_argument("--max-sentence-bytes must be at least 1");
  if (limits.max_answer_bytes < 1024) throw std::invalid_argument("--max-answer-bytes must be at least 1024");
  if ((options.max_body_memory << 20) < limits.max_body_bytes + HttpLimits{}.max_head_bytes) {
    throw std::invalid_argument("--max-body-memory (" + std::to_string(options.max_body_memory) +
                                " MiB) must hold at least one body of --max-body-bytes and its headers (64 KiB)");
  }
  if (options.access_log_text && options.access_log.empty()) {
    throw std::invalid_argument("--access-log-text needs --access-log FILE to write to");
  }
  if (limits.max_beam_size < options.translate.search.beam_size) {
    throw std::invalid_argument("--max-beam-size must be at least --beam-size (" +
                                std::to_string(options.translate.search.beam_size) + ")");
  }
}

HttpAnswer json_answer(int status, const json& body) {
  return {status, kJson, body.dump(-1, ' ', false, json::error_handler_t::replace)};
}

HttpAnswer error_answer(int status, const std::string& message) { return {status, kJson, error_body(message)}; }

// An exception's message, its first line (LibTorch's carry a backtrace after it).
std::string exception_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& exception) {
    const std::string what = exception.what_without_backtrace();
    return what.substr(0, what.find('\n'));
  } catch (const std::exception& exception) {
    return exception.what();
  } catch (...) {
  }
  return "internal error";
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
  double start_time = 0;  // seconds since the epoch
  std::atomic<size_t> requests_served{0};
  std::atomic<size_t> requests_refused{0};
  std::atomic<size_t> sentences_cut{0};                       // parts of long sentences (--cut-sentences)
  size_t longest_source_piece = 0, longest_target_piece = 0;  // answer_bytes_bound's
  std::shared_ptr<const SentenceSplitter> splitter;           // null: a text is one sentence
  std::shared_ptr<const Framer> framer;                       // null: no markup, nothing protected
  std::shared_ptr<const ClauseCutter> cutter;                 // null: no sentence is cut
  const ApiKeys keys;                                         // none: no key needed
  const AllowedOrigins origins;
  std::unique_ptr<AccessLog> access_log;  // null: none
  ServerMetrics metrics;
  const HttpServer* server = nullptr;  // set once it is made: its load, for /ready and /metrics
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
  return batch_workers(device, static_cast<size_t>(std::clamp(torch::get_num_threads(), 1, 256)));
}

BatchQueueOptions batch_queue_options(const ServeOptions& options, const torch::Device& device,
                                      ServerMetrics& metrics) {
  BatchQueueOptions queue_options;
  queue_options.on_batch = [&metrics](size_t sentences) { metrics.count_batch(sentences); };
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
      start_time(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()),
      longest_source_piece(longest_piece_json(models.source_vocabulary())),
      longest_target_piece(longest_piece_json(models.target_vocabulary())),
      splitter(text_splitter(options.translate.text, models.ensemble())),
      framer(text_framer(options.translate.text, models.source_vocabulary())),
      cutter(text_cutter(options.translate.text, models.ensemble(), models.source_vocabulary())),
      keys(options.api_key_file.empty() ? ApiKeys() : ApiKeys::from_file(options.api_key_file)),
      origins(options.allow_origins),
      access_log(options.access_log.empty() ? nullptr
                                            : std::make_unique<AccessLog>(options.access_log, options.access_log_text)),
      queue(models, batch_queue_options(options, device, metrics), device) {
  // A wrong --target-language stops the server before it listens; an empty one leaves the choice to
  // each request (or to the model's only language).
  if (!options.translate.text.target_language.empty()) {
    target_language_tag(options.translate.text.target_language, models.ensemble(), models.source_vocabulary());
  }
}

HttpLimits http_limits(const ServeOptions& options) {
  HttpLimits limits;
  limits.max_body_bytes = options.limits.max_body_bytes;
  limits.max_memory = options.max_body_memory << 20;
  limits.max_answering = static_cast<size_t>(options.connections);
  limits.max_waiting = waiting_connections_that_fit(static_cast<size_t>(options.max_waiting_connections),
                                                    static_cast<size_t>(options.connections));
  limits.header_seconds = options.header_timeout;
  limits.request_seconds = options.request_timeout;
  limits.answer_seconds = options.answer_timeout;
  limits.min_send_rate = options.min_send_rate;
  return limits;
}

// The last part of each ", "-joined path: what /health says of files, without where they are on
// the server's disks.
std::string file_names(const std::string& paths) {
  std::string names;
  for (size_t start = 0; start < paths.size();) {
    const size_t end = std::min(paths.find(", ", start), paths.size());
    std::filesystem::path path(paths.substr(start, end - start));
    if (!path.has_filename()) path = path.parent_path();  // "models/demo/"
    names += (names.empty() ? "" : ", ") + path.filename().string();
    start = end + 2;
  }
  return names;
}

// GET /health.
HttpAnswer health(const Service& service) {
  const double uptime = std::chrono::duration<double>(Clock::now() - service.started).count();
  return json_answer(200, {{"status", "ok"},
                           {"model", file_names(service.model_dirs)},
                           {"checkpoint", file_names(service.checkpoint)},
                           {"attention", service.models.attention()},
                           {"source_vocabulary", service.models.source_vocabulary().size()},
                           {"target_vocabulary", service.models.target_vocabulary().size()},
                           {"device", service.device.str()},
                           {"threads", service.threads},
                           {"workers", service.queue.workers()},
                           {"beam_size", service.options.translate.search.beam_size},
                           {"compute_type", service.models.compute_type},
                           {"shortlist", file_names(service.options.translate.shortlist)},
                           {"continuous_batching", continuous_batching(service.options)},
                           {"uptime_seconds", uptime},
                           {"requests_served", service.requests_served.load()},
                           {"requests_refused", service.requests_refused.load()},
                           {"sentences_translated", service.queue.sentences_done()},
                           {"sentences_capped", service.queue.sentences_capped()},
                           {"sentences_cut", service.sentences_cut.load()},
                           {"split_sentences", service.splitter != nullptr},
                           {"source_language", service.splitter ? service.splitter->language() : ""},
                           {"target_languages", service.models.members.front().options.target_languages},
                           {"markup", service.options.translate.text.markup},
                           {"placeholders", service.options.translate.text.placeholders},
                           {"placeholder_tokens", service.framer ? service.framer->placeholder_tokens() : 0},
                           {"cut_sentences", service.cutter ? service.cutter->most() : 0},
                           {"batches", service.queue.batches_done()},
                           {"api_keys", !service.keys.empty()}});
}

// Why GET /ready answers 503, or "" while the server takes new requests.
std::string not_ready(const Service& service) {
  if (service.server == nullptr) return "starting";
  if (service.server->stopping()) return "stopping: answering the requests in flight";
  // While --connections requests are in flight, the HTTP side answers this one itself with 503.
  return "";
}

// GET /ready: for a load balancer, which sends new requests elsewhere while it is 503.
HttpAnswer ready(const Service& service) {
  const std::string reason = not_ready(service);
  if (!reason.empty()) return json_answer(503, {{"ready", false}, {"reason", reason}});
  return json_answer(200, {{"ready", true}, {"models", service.models.ensemble().members().size()}});
}

// GET /metrics.
HttpAnswer metrics(const Service& service) {
  MetricsGauges gauges;
  gauges.requests_in_flight = service.server ? service.server->answering() : 0;
  gauges.queued_sentences = service.queue.sentences_waiting();
  gauges.models = service.models.ensemble().members().size();
  gauges.ready = not_ready(service).empty();
  gauges.start_time = service.start_time;
  return {200, "text/plain; version=0.0.4; charset=utf-8", service.metrics.text(gauges)};
}

// Refuses a request with a sentence whose search alone would hold more than --max-search-memory
// (search/memory.h), before it joins a batch that other requests share.
void check_search_memory(const Service& service, const TranslateRequest& request, const SentencePlan& plan) {
  const int64_t bound = int64_t{service.options.translate.batching.max_search_memory} << 20;
  const Ensemble model = service.models.ensemble();
  for (size_t sentence = 0; sentence < plan.sentences.size(); ++sentence) {
    const size_t i = plan.line_of(sentence);
    const auto length = static_cast<int64_t>(plan.subwords[sentence].size() + request.source_tags) + 1;
    const int64_t bytes =
        sentence_search_bytes(model, length, service.models.target_vocabulary().size(), request.search);
    if (bytes > bound) {
      throw RequestError(413, "text[" + std::to_string(i) + "] has a sentence of " + std::to_string(length) +
                                  " subwords that needs about " + std::to_string((bytes >> 20) + 1) +
                                  " MiB for its search at beam_size " + std::to_string(request.search.beam_size) +
                                  ", more than the server's --max-search-memory " +
                                  std::to_string(service.options.translate.batching.max_search_memory) +
                                  ": send a shorter sentence or a smaller beam_size");
    }
  }
}

// Refuses a request whose answer could pass --max-answer-bytes (answer_bytes_bound), before the
// search.
void check_answer_size(const Service& service, const TranslateRequest& request, const SentencePlan& plan) {
  const size_t bound = answer_bytes_bound(request, plan, service.longest_source_piece, service.longest_target_piece);
  const size_t limit = service.options.limits.max_answer_bytes;
  if (bound > limit) {
    throw RequestError(413, "the answer could reach " + std::to_string((bound >> 20) + 1) + " MiB" +
                                (request.attention ? " with its attention" : "") + ", more than the server's " +
                                "--max-answer-bytes " + std::to_string(limit) + ": send fewer or shorter sentences" +
                                (request.attention ? ", or no attention" : ""));
  }
}

// A translated request in the metrics, and its texts in the access log's line when asked.
void count_translated(Service& service, const TranslateRequest& request, const std::vector<Translation>& lines,
                      HttpAnswer& answer) {
  size_t sentences = 0, source_subwords = 0, target_subwords = 0;
  json translations = json::array();
  for (const Translation& line : lines) {
    sentences += line.sentences.size();
    source_subwords += line.source_pieces.size();
    for (size_t tokens : line.sentence_tokens) target_subwords += tokens;
    translations.push_back(line.texts.empty() ? "" : line.texts.front());
  }
  service.metrics.count_translated(sentences, source_subwords, target_subwords);
  if (service.options.access_log_text) {
    answer.log_fields = json{{"text", request.text}, {"translations", translations}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
  }
}

// POST /translate: checked here, then queued; the answer is written when its batch is done.
void answer_translate(Service& service, const HttpRequest& http_request, const Respond& respond) {
  const ServeOptions& options = service.options;
  try {
    auto request = std::make_shared<TranslateRequest>(
        parse_translate_request(http_request.body, options.translate.search, options.limits));
    if (request->search.return_attention && !service.models.has_attention()) {
      throw RequestError(400, "attention/alignment: this model was trained with attention none");
    }
    if (request->target_language.empty()) request->target_language = options.translate.text.target_language;
    try {
      const int64_t tag = target_language_tag(request->target_language, service.models.ensemble(),
                                              service.models.source_vocabulary(), "target_language");
      request->source_tags = tag >= 0 ? 1 : 0;
    } catch (const std::invalid_argument& error) {
      throw RequestError(400, error.what());
    }
    std::vector<std::vector<int64_t>> subwords;  // encoded once: checked here, translated by the queue
    for (const std::string& text : request->text) subwords.push_back(service.models.source_vocabulary().encode(text));
    check_guides(*request, subwords, service.models.target_vocabulary(),
                 service.models.ensemble().members().front()->options().reverse_target);
    TargetGuides guides;  // a text with a prefix or constraints stays one sentence
    guides.prefixes.lines = request->prefix;
    guides.constraints.lines = request->constraints;
    std::shared_ptr<const Framer> framer = service.framer;
    if (!request->markup.empty() && request->markup != service.options.translate.text.markup) {
      framer = std::make_shared<const Framer>(
          framer ? framer->with_markup(request->markup)
                 : Framer(request->markup, "none", {}, service.models.source_vocabulary()));
    }
    std::shared_ptr<SentencePlan> plan;
    try {
      plan = std::make_shared<SentencePlan>(plan_sentences(service.splitter.get(), framer.get(), service.cutter.get(),
                                                           request->text, guides, std::move(subwords),
                                                           service.models.source_vocabulary()));
    } catch (const std::invalid_argument& error) {  // the text was checked as UTF-8 already
      throw RequestError(400, std::string("text: ") + error.what());
    }
    // Markup and protected spans go back by the attention.
    if (plan->needs_alignment && !request->search.return_attention && service.models.has_attention()) {
      request->search.return_attention = plan->attention_for_frames = true;
    }
    check_search_memory(service, *request, *plan);
    check_answer_size(service, *request, *plan);
    if (plan->sentences.empty()) {  // no text, or only white space: nothing to search
      ++service.requests_served;
      return respond(json_answer(200, translations_json(*request,
                                                        join_lines(*plan, {}, service.models.source_vocabulary(),
                                                                   service.models.target_vocabulary()),
                                                        service.models.target_vocabulary())));
    }
    // On a worker's thread, which must not throw.
    auto done = [&service, request, plan, respond](std::vector<Translation> translations, std::exception_ptr error) {
      try {
        if (error) std::rethrow_exception(error);
        std::vector<Translation> lines = join_lines(*plan, std::move(translations), service.models.source_vocabulary(),
                                                    service.models.target_vocabulary());
        for (const Translation& line : lines) service.sentences_cut += line.cut.size();
        TranslateOptions scoring = service.options.translate;  // the request's language
        scoring.text.target_language = request->target_language;
        const std::vector<TokenLogProbabilities> log_probabilities =
            request->confidence ? best_token_log_probabilities(service.models, scoring, lines)
                                : std::vector<TokenLogProbabilities>{};
        HttpAnswer answer =
            json_answer(200, translations_json(*request, lines, service.models.target_vocabulary(), log_probabilities));
        count_translated(service, *request, lines, answer);
        ++service.requests_served;
        respond(std::move(answer));
      } catch (...) {
        const std::string message = exception_message(std::current_exception());
        spdlog::error("POST /translate failed: {}", message);
        respond(error_answer(500, message));
      }
    };
    service.queue.submit(plan->sentences, request->search, plan->guides.prefixes.lines, plan->guides.constraints.lines,
                         std::move(plan->subwords), std::move(done), request->target_language);
  } catch (const RequestError& error) {
    ++service.requests_refused;
    respond(error_answer(error.status(), error.what()));
  }
}

// The method each endpoint takes, or "" for a path that is none.
std::string endpoint_method(const std::string& path) {
  if (path == "/translate") return "POST";
  if (path == "/" || path == "/health" || path == "/ready" || path == "/metrics") return "GET";
  return "";
}

// Whether an endpoint needs a key (with --api-key-file): what translates or tells of the traffic.
// The page, /health and /ready stay open, so that a browser can load the page and a load balancer
// can probe.
bool needs_key(const std::string& path) { return path == "/translate" || path == "/metrics"; }

// What is refused before a body is read: a Host that is not this server's, an unknown path, the
// wrong method, a missing or wrong key, a /translate body that is not JSON. OPTIONS is a browser's
// preflight, granted to --allow-origin's origins.
std::optional<HttpAnswer> refusal(const Service& service, const HttpRequest& head) {
  if (!host_allowed(head.host, service.options.host, service.options.allow_hosts)) {
    return error_answer(421, "Host " + printable(head.host) +
                                 " is not a name of this server: start it with --allow-host NAME to answer it");
  }
  const std::string method = endpoint_method(head.path);
  if (method.empty()) {
    return error_answer(404, "no such endpoint: " + printable(head.method) + " " + printable(head.path) +
                                 " (the endpoints are GET /, GET /health, GET /ready, GET /metrics and POST "
                                 "/translate)");
  }
  if (head.method == "OPTIONS") return std::nullopt;  // answered by options_answer
  if (head.method != method) {
    return error_answer(405, method == "POST" ? "/translate takes POST with a JSON body like {\"text\": [\"...\"]}"
                                              : head.path + " takes GET");
  }
  if (needs_key(head.path) && !service.keys.admits(head.authorization)) return unauthorized(head.authorization);
  // application/json only: a browser sends it cross-site only after a preflight, which this server
  // grants only to --allow-origin's origins, so no other site's page can make the operator's
  // browser post here.
  if (method == "POST" && header_token(head.content_type) != kJson) {
    return error_answer(
        415, "POST /translate takes Content-Type: application/json, not " +
                 (head.content_type.empty() ? std::string("none") : "\"" + printable(head.content_type) + "\"") +
                 " (curl: -H 'Content-Type: application/json')");
  }
  return std::nullopt;
}

// OPTIONS: a browser's preflight (with an Origin), granted to --allow-origin's origins, or what a
// path allows.
HttpAnswer options_answer(const Service& service, const HttpRequest& request) {
  const std::string method = endpoint_method(request.path);
  if (!request.origin.empty()) return service.origins.preflight(request.origin, method);
  HttpAnswer answer{204, kJson, ""};
  answer.headers.emplace_back("Allow", method + ", OPTIONS");
  return answer;
}

// The CORS fields of an answer to a page on an allowed origin.
HttpAnswer with_origin(const Service& service, const std::string& origin, HttpAnswer answer) {
  for (auto& field : service.origins.answer_headers(origin)) answer.headers.push_back(std::move(field));
  return answer;
}

HttpRoutes routes(Service& service) {
  HttpRoutes routes;
  routes.refuse = [&service](const HttpRequest& head) -> std::optional<HttpAnswer> {
    std::optional<HttpAnswer> refused = refusal(service, head);
    if (refused) *refused = with_origin(service, head.origin, std::move(*refused));
    return refused;
  };
  routes.answer = [&service](HttpRequest request, Respond respond) {
    if (request.method == "OPTIONS") return respond(options_answer(service, request));
    if (!request.origin.empty()) {
      Respond plain = std::move(respond);
      respond = [&service, origin = request.origin, plain = std::move(plain)](HttpAnswer answer) {
        plain(with_origin(service, origin, std::move(answer)));
      };
    }
    try {
      if (request.path == "/") return respond({200, "text/html; charset=utf-8", page_html()});
      if (request.path == "/health") return respond(health(service));
      if (request.path == "/ready") return respond(ready(service));
      if (request.path == "/metrics") return respond(metrics(service));
      answer_translate(service, request, respond);
    } catch (const std::exception& error) {  // a 500 that a page on an allowed origin can read
      spdlog::error("{} {} failed: {}", request.method, request.path, error.what());
      respond(error_answer(500, error.what()));
    }
  };
  routes.refused = [&service] { ++service.requests_refused; };
  routes.done = [&service](const HttpExchange& exchange) {
    service.metrics.count(exchange);
    if (service.access_log) service.access_log->write(exchange);
  };
  return routes;
}

// Serves until the first SIGINT or SIGTERM, then until every request in flight is answered.
void serve_until_signal(HttpServer& server) {
  std::atomic<bool> finished{false};
  std::thread stopper([&] {
    char byte = 0;
    while (::read(signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    if (finished) return;
    spdlog::info("SIG{}: no new connections; answering the requests in flight, then exiting", sigabbrev_np(byte));
    server.stop();
  });
  server.run();  // returns after stop(), once every request in flight is answered
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

bool host_allowed(const std::string& host, const std::string& listening, const std::vector<std::string>& allowed) {
  if (host.empty()) return true;  // HTTP/1.0, or a client that is not a browser
  std::string name = host;
  if (name.front() == '[') {
    name = name.substr(1, name.find(']') == std::string::npos ? std::string::npos : name.find(']') - 1);
  } else if (std::count(name.begin(), name.end(), ':') == 1) {
    name = name.substr(0, name.find(':'));
  }
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost." is "localhost"
  boost::system::error_code not_an_address;
  boost::asio::ip::make_address(name, not_an_address);
  if (!not_an_address) return true;
  const std::string suffix = ".localhost";
  if (name == "localhost" ||
      (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)) {
    return true;
  }
  std::string own = listening;
  std::transform(own.begin(), own.end(), own.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name == own) return true;
  for (std::string entry : allowed) {
    std::transform(entry.begin(), entry.end(), entry.begin(), [](unsigned char c) { return std::tolower(c); });
    if (entry == "*" || entry == name) return true;
  }
  return false;
}

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

  HttpServer server(http_limits(options), routes(service));
  service.server = &server;
  const int port = server.listen(options.host, options.port);
  spdlog::info("nmt serve: {} ({} attention, {} and {} subwords) on {}", service.checkpoint, models.attention(),
               models.source_vocabulary().size(), models.target_vocabulary().size(), device.str());
  if (!service.keys.empty()) {
    spdlog::info("--api-key-file: {} keys; /translate and /metrics need one", service.keys.size());
  }
  spdlog::info("listening on http://{}:{}/", options.host, port);

  serve_until_signal(server);
  // The workers end before the server: a worker that has just handed over an answer may still
  // hold its connection, which must not outlive the server it belongs to.
  service.queue.stop();
  spdlog::info("stopped: {} served, {} refused; {} sentences translated in {} batches", service.requests_served.load(),
               service.requests_refused.load(), service.queue.sentences_done(), service.queue.batches_done());
  if (service.access_log && service.access_log->dropped() > 0) {
    spdlog::warn("--access-log {}: {} lines lost (the log did not keep up, or could not be written)",
                 options.access_log, service.access_log->dropped());
  }
}

}  // namespace nmt::serve
