// nmt_load: the load generator of scripts/bench/serve.sh. N clients, each on its own keep-alive
// connection, send one sentence per POST /translate (the lines of a file, in turn) and wait for the
// answer before sending the next, until `--requests` have been answered or `--seconds` have passed.
// Prints one Markdown table row:
//
//   | clients | requests | errors | sentences/s | p50 ms | p90 ms | p99 ms | max ms |
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string input;
  int clients = 1;
  size_t requests = 1000;
  double seconds = 60;
  int beam_size = 1;
  CLI::App app{"nmt_load: concurrent single-sentence clients for nmt serve"};
  app.add_option("--host", host)->capture_default_str();
  app.add_option("--port", port)->required();
  app.add_option("--input", input, "one sentence per line")->required()->check(CLI::ExistingFile);
  app.add_option("--clients", clients)->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--requests", requests, "stop after this many answers")->capture_default_str();
  app.add_option("--seconds", seconds, "or after this long")->capture_default_str();
  app.add_option("--beam-size", beam_size)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> bodies;
  std::ifstream file(input);
  for (std::string line; std::getline(file, line);) {
    if (!line.empty()) bodies.push_back(nlohmann::json{{"text", line}, {"beam_size", beam_size}}.dump());
  }
  if (bodies.empty()) {
    std::cerr << "nmt_load: " << input << " has no sentences\n";
    return 1;
  }

  std::atomic<size_t> next{0};
  std::atomic<size_t> errors{0};
  std::mutex mutex;
  std::vector<double> latencies;  // milliseconds
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client(host, port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);  // as browsers and curl do: no Nagle delay between header and body
      client.set_read_timeout(120);
      std::vector<double> own;
      for (size_t k = next++; k < requests && Clock::now() < deadline; k = next++) {
        const auto sent = Clock::now();
        httplib::Result result = client.Post("/translate", bodies[k % bodies.size()], "application/json");
        if (!result || result->status != 200) {
          ++errors;
          if (errors == 1) {
            std::cerr << "nmt_load: " << (result ? result->body : httplib::to_string(result.error())) << "\n";
          }
          continue;
        }
        own.push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
      }
      std::lock_guard<std::mutex> lock(mutex);
      latencies.insert(latencies.end(), own.begin(), own.end());
    });
  }
  for (auto& thread : threads) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("| %d | %zu | %zu | %.1f | %.1f | %.1f | %.1f | %.1f |\n", clients, latencies.size(), errors.load(),
              static_cast<double>(latencies.size()) / elapsed, percentile(latencies, 0.5), percentile(latencies, 0.9),
              percentile(latencies, 0.99), percentile(latencies, 1.0));
  return errors == 0 ? 0 : 1;
}
