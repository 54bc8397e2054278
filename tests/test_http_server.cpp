// The HTTP layer alone (serve/http_server.h), in this process with routes of the test's own: what
// a connection may hold in each phase, and which thread does what. The whole server, with a model
// behind it, is test_serve.cpp's.
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "process_helpers.h"
#include "serve/http_server.h"

using namespace nmt;
using namespace nmt::serve;
using namespace nmt::testing;

namespace {

// An HttpServer on a free loopback port, run on its own thread until the test ends.
class LocalServer {
 public:
  LocalServer(HttpLimits limits, HttpRoutes routes) : server_(limits, std::move(routes)) {
    port = server_.listen("127.0.0.1", 0);
    thread_ = std::thread([this] { server_.run(); });
  }
  ~LocalServer() {
    server_.stop();
    thread_.join();
  }
  int port = 0;

 private:
  HttpServer server_;
  std::thread thread_;
};

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + "\r\n";
}

std::string post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

// The answer to `request` on a new connection, read until the server closes it or `seconds` pass.
std::string ask(int port, const std::string& request, double seconds = 5) {
  const int socket = open_connection(port, request);
  if (socket < 0) return "";
  ::shutdown(socket, SHUT_WR);
  bool closed = false;
  std::string answer = read_until_closed(socket, seconds, closed);
  ::close(socket);
  return answer;
}

// Descriptors this process holds now.
size_t open_descriptors() {
  size_t count = 0;
  if (DIR* directory = ::opendir("/proc/self/fd")) {
    while (::readdir(directory) != nullptr) ++count;
    ::closedir(directory);
  }
  return count;
}

HttpRoutes echo_routes() {
  HttpRoutes routes;
  routes.answer = [](HttpRequest request, Respond respond) {
    respond({200, "text/plain", request.method + " " + request.path + " " + std::to_string(request.body.size())});
  };
  return routes;
}

}  // namespace

TEST_CASE("http server: a request with a body is handled on a worker, never on a network thread", "[serve]") {
  // One network thread. A body's route that blocks (as parsing a megabyte of JSON does) once held
  // it, and GET /health waited behind it.
  HttpLimits limits;
  limits.threads = 1;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> entered{false};
  HttpRoutes routes;
  routes.answer = [&](HttpRequest request, Respond respond) {
    if (!request.body.empty()) {
      entered = true;
      released.wait_for(std::chrono::seconds(10));
      return respond({200, "text/plain", "slow"});
    }
    respond({200, "text/plain", "quick"});
  };
  LocalServer server(limits, routes);
  const int slow = open_connection(server.port, post("/parse", std::string(1000, 'x')));
  REQUIRE(slow >= 0);
  REQUIRE(wait_until([&] { return entered.load(); }, 10));
  const std::string health = ask(server.port, get("/health", "Connection: close\r\n"), 3);
  release.set_value();
  CHECK(status_of(health) == 200);
  CHECK_THAT(health, Catch::EndsWith("quick"));
  bool closed = false;
  CHECK_THAT(read_until_closed(slow, 5, closed), Catch::Contains("slow"));
  ::close(slow);
}

TEST_CASE("http server: a flood of header fields is refused and its bytes are held in the memory budget", "[serve]") {
  HttpLimits limits;
  limits.max_memory = 4 << 20;
  LocalServer server(limits, echo_routes());
  // Host, Connection and `count` more.
  const auto with_fields = [](int count) {
    std::string fields = "Connection: close\r\n";
    for (int i = 0; i < count; ++i) fields += "a" + std::to_string(i) + ": b\r\n";
    return get("/", fields);
  };
  const std::string refused = ask(server.port, with_fields(99));
  CHECK(status_of(refused) == 431);
  CHECK_THAT(refused, Catch::Contains("over 100 header fields"));
  CHECK(status_of(ask(server.port, with_fields(98))) == 200);
  const std::string twice = ask(server.port, get("/", "Host: example.com\r\nConnection: close\r\n"));
  CHECK(status_of(twice) == 400);
  CHECK_THAT(twice, Catch::Contains("more than one Host"));

  // 200 connections that have sent 60 KiB of their headers: each holds its read buffer in the
  // budget, and past 4 MiB of them the ones that have made the least progress are closed. (Whole
  // heads once held 16 times their bytes as parsed fields, outside any budget.)
  std::string big;
  for (int i = 0; i < 90; ++i) big += "x" + std::to_string(i) + ": " + std::string(680, 'v') + "\r\n";
  std::vector<int> holding;
  for (int i = 0; i < 200; ++i) {
    holding.push_back(
        open_connection(server.port, "POST /a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n" + big));
    REQUIRE(holding.back() >= 0);
  }
  // Closed by the server as it reads them: polled until enough are, or 10 s have passed.
  const int at_least = 200 - (4 << 20) / (60 << 10);
  std::vector<bool> closed(holding.size(), false);
  int closed_count = 0;
  wait_until(
      [&] {
        for (size_t i = 0; i < holding.size(); ++i) {
          if (closed[i] || !closed_by_peer(holding[i])) continue;
          closed[i] = true;
          ++closed_count;
        }
        return closed_count >= at_least;
      },
      10);
  for (int socket : holding) ::close(socket);
  CHECK(closed_count >= at_least);
  CHECK(status_of(ask(server.port, post("/a", "0123456789"))) == 200);
}

TEST_CASE("http server: an answer frees its request's place once built, and a client that reads none is dropped",
          "[serve]") {
  HttpLimits limits;
  limits.max_answering = 1;
  limits.min_send_rate = 1e9;  // an answer is written within 2 s and its size at 1 GB/s
  const std::string big(24 << 20, 'x');
  HttpRoutes routes;
  routes.answer = [&](HttpRequest request, Respond respond) {
    respond({200, "text/plain", request.path == "/big" ? big : "small"});
  };
  LocalServer server(limits, routes);
  // A client that asks for an answer larger than the sockets' buffers and reads none of it. It
  // once kept --connections 1 full until --answer-timeout (30 s): every other request got 503.
  const int reader = open_connection(server.port, get("/big"));
  REQUIRE(reader >= 0);
  // Its answer is built once its first bytes arrive (the place goes before the writing starts).
  REQUIRE(wait_until(
      [&] {
        pollfd ready{reader, POLLIN, 0};
        return ::poll(&ready, 1, 0) > 0;
      },
      10));
  CHECK(status_of(ask(server.port, get("/small", "Connection: close\r\n"))) == 200);
  // Past its deadline (2 s and its size at 1 GB/s) it is dropped: reading after 3.5 s of reading
  // nothing, which is what this checks, gets what the sockets held, not the whole answer.
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  bool closed = false;
  const std::string read = read_until_closed(reader, 10, closed);
  ::close(reader);
  CHECK(closed);
  CHECK(read.size() < big.size());
}

TEST_CASE("http server: answers are held in the memory budget", "[serve]") {
  HttpLimits limits;
  limits.max_memory = 4 << 20;
  HttpRoutes routes;
  routes.answer = [](HttpRequest request, Respond respond) {
    respond({200, "text/plain", std::string(request.path == "/huge" ? 6 << 20 : 1000, 'x')});
  };
  LocalServer server(limits, routes);
  const std::string huge = ask(server.port, get("/huge"));
  CHECK(status_of(huge) == 503);
  CHECK_THAT(huge, Catch::Contains("answers being written"));
  CHECK(status_of(ask(server.port, get("/small", "Connection: close\r\n"))) == 200);
}

TEST_CASE("http server: connections closing after a refusal count among the waiting ones", "[serve]") {
  // Their descriptors count as any waiting connection's: at most max_waiting of them all. (They
  // were counted apart, so twice as many descriptors could be held as the cap said.)
  HttpLimits limits;
  limits.max_waiting = 10;
  LocalServer server(limits, echo_routes());
  const size_t before = open_descriptors();
  std::vector<int> sockets;
  const std::string partial = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < 10; ++i) {
    // Refused (400), then lingering as long as the client keeps its end open and sends nothing.
    sockets.push_back(open_connection(server.port, "NOT HTTP\r\n\r\n"));
    REQUIRE(sockets.back() >= 0);
  }
  // Each refusal written and the writing side shut: the server's end lingers, for 2 s at most.
  std::vector<bool> refused(10, false);
  REQUIRE(wait_until(
      [&] {
        for (size_t i = 0; i < refused.size(); ++i) refused[i] = refused[i] || closed_by_peer(sockets[i]);
        return std::find(refused.begin(), refused.end(), false) == refused.end();
      },
      10));
  for (int i = 0; i < 10; ++i) {
    sockets.push_back(open_connection(server.port, partial));
    REQUIRE(sockets.back() >= 0);
  }
  // The partial heads read: each made room among the waiting (closes posted to their sessions).
  REQUIRE(wait_until([&] { return server_has_read(std::vector<int>(sockets.begin() + 10, sockets.end())); }, 10));
  const auto held = [&] { return open_descriptors() - before - sockets.size(); };
  // Well before the lingering ends (2 s after the refusals), which would close them anyway.
  wait_until([&] { return held() <= limits.max_waiting; }, 0.5);
  const size_t held_now = held();
  for (int socket : sockets) ::close(socket);
  CHECK(held_now <= limits.max_waiting);
}
