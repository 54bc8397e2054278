// nmt serve: translation over HTTP with requests batched together (serve/server.h).
#include <memory>

#include "cli/command.h"
#include "config/translate_options.h"
#include "serve/server.h"

namespace nmt::cli {

Command add_serve(CLI::App& program) {
  auto options = std::make_shared<serve::ServeOptions>();
  CLI::App* command =
      program.add_subcommand("serve", "translate over HTTP: POST /translate (JSON), GET /health, GET / (a page)");
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
  add("--connections", options->connections, "requests read and answered at once (one thread each)");
  add("--max-waiting-connections", options->max_waiting_connections,
      "connections waiting, without a thread, for their request line and headers or their next request; past "
      "this the oldest is closed");
  add("--header-timeout", options->header_timeout,
      "seconds from a request's first byte to the end of its headers (then 408 and closed)");
  add("--max-body-bytes", options->limits.max_body_bytes, "largest request body");
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
