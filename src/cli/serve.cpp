// nmt serve: translation over HTTP with requests batched together (serve/server.h).
#include <memory>

#include "cli/command.h"
#include "config/translate_options.h"
#include "serve/server.h"

namespace nmt::cli {

Command add_serve(CLI::App& program) {
  auto options = std::make_shared<serve::ServeOptions>();
  CLI::App* command = program.add_subcommand(
      "serve", "translate over HTTP: POST /translate (JSON), GET /health, /ready, /metrics, GET / (a page)");
  command
      ->add_option(
          "--model", options->translate.models,
          "model directory (from nmt train) or exported model file (nmt export); several decode as an ensemble")
      ->required();
  const auto add = [&](const std::string& name, auto& value, const std::string& help) {
    command->add_option(name, value, help)->capture_default_str();
  };
  add("--host", options->host, "address to listen on (0.0.0.0: every interface)");
  add("--port", options->port, "port to listen on (0: any free port)");
  command->add_option("--allow-host", options->allow_hosts,
                      "a name clients reach this server by (their Host header), besides IP addresses, localhost and "
                      "--host; repeatable; * allows any (other names get 421: pages on other sites cannot reach a "
                      "server on loopback by DNS rebinding)");
  command->add_option("--api-key-file", options->api_key_file,
                      "a file of API keys, one a line (at least 16 characters; only its owner may read it): POST "
                      "/translate and GET /metrics then need the header Authorization: Bearer KEY (401 without "
                      "one); GET /, /health and /ready stay open");
  command->add_option("--allow-origin", options->allow_origins,
                      "an origin (https://example.org) whose pages may call this server from a browser (CORS); "
                      "repeatable; * allows any (by default no page on another site can read an answer)");
  command->add_option("--access-log", options->access_log,
                      "append one JSON line per request to this file (- for standard output): time, method, path, "
                      "status, bytes, seconds, client address, X-Forwarded-For");
  command->add_flag("--access-log-text", options->access_log_text,
                    "put each request's texts and their translations into its --access-log line too");
  add("--max-batch", options->max_batch, "sentences translated together, across requests");
  add("--max-wait-ms", options->max_wait_ms, "how long a request may wait for others to share its batch");
  command
      ->add_option("--batching", options->batching,
                   "how greedy requests are batched: continuous (joining the running batch between two decoder "
                   "steps), static (in whole batches, as other searches always are), or auto (continuous, static "
                   "with --shortlist)")
      ->check(CLI::IsMember({"auto", "continuous", "static"}))
      ->capture_default_str();
  add("--workers", options->workers,
      "batches translated at once, several on one thread each (0 = one per --threads on the CPU, one on a GPU)");
  add("--connections", options->connections,
      "requests being translated and answered at once (past this, 503 and Retry-After)");
  add("--max-waiting-connections", options->max_waiting_connections,
      "connections waiting for a request, its headers or its body, or having their answer written or closing; "
      "past this the one waiting longest is closed");
  add("--header-timeout", options->header_timeout,
      "seconds from a request's first byte to the end of its headers (then 408 and closed)");
  add("--request-timeout", options->request_timeout,
      "seconds from a request's first byte to the last byte of its body (then 408 and closed)");
  add("--answer-timeout", options->answer_timeout,
      "most seconds to write a whole answer; a client reading slower is dropped");
  add("--min-send-rate", options->min_send_rate,
      "bytes a second an answer must be read at, after 2 s (a client reading slower is dropped)");
  add("--max-body-bytes", options->limits.max_body_bytes,
      "largest request body, whatever its framing (Content-Length or chunked; compressed bodies are refused)");
  add("--max-body-memory", options->max_body_memory,
      "MiB of request headers, bodies and answers held at once over all connections (past this the "
      "connection that has made the least progress is closed, or 503)");
  add("--max-answer-bytes", options->limits.max_answer_bytes,
      "largest answer a request may ask for, bounded before its search (attention rows above all; past it, 413)");
  add("--max-sentences", options->limits.max_sentences, "most sentences in one request");
  add("--max-sentence-bytes", options->limits.max_sentence_bytes, "longest sentence");
  add("--max-beam-size", options->limits.max_beam_size, "largest beam_size a request may ask");
  add_translate_options(*command, options->translate);
  return {command, [options] {
            warn_if_slow_blas();
            serve::serve(*options);
            return 0;
          }};
}

}  // namespace nmt::cli
