// The rendezvous store (train/rendezvous_store.h) as a client on the network would try it: the
// address it listens on, clients and servers that do not know the secret, silent and crowding
// connections; and the store's own semantics, which c10d's process groups rely on.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "process_helpers.h"
#include "train/distributed.h"
#include "train/rendezvous_store.h"

namespace nmt::testing {
namespace {

using namespace std::chrono_literals;

const std::string kSecret = "a secret of the test run, 0123456789";

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }

// Whether a connection to host:port is accepted (a raw TCP connect).
bool accepts(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(::inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1);
  const bool connected = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return connected;
}

// Whether the server closes `fd` within `seconds` (reads end of file or a reset).
bool closed_within(int fd, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buffer[256];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd item{fd, POLLIN, 0};
    if (::poll(&item, 1, 50) == 1) {
      const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
      if (got <= 0) return true;
    }
  }
  return false;
}

template <typename Condition>
bool eventually(Condition condition) {
  for (int i = 0; i < 100 && !condition(); ++i) std::this_thread::sleep_for(20ms);
  return condition();
}

}  // namespace

TEST_CASE("rendezvous store: it listens on the given address alone", "[distributed]") {
  RendezvousServer server("127.0.0.1", 0, kSecret);
  CHECK(accepts("127.0.0.1", server.port()));
  // All of 127/8 is this machine: a server that listened on every address would accept here.
  CHECK_FALSE(accepts("127.0.0.2", server.port()));
}

TEST_CASE(
    "rendezvous store: only clients that prove the secret are served, and only servers that prove it are believed",
    "[distributed]") {
  RendezvousServer server("127.0.0.1", 0, kSecret);
  RendezvousStore store("127.0.0.1", server.port(), kSecret, 5s);
  store.set("decision/3", bytes("rank 0's"));

  // A client with another secret learns that the server's proof does not match its secret, and
  // leaves before it can read or write anything.
  CHECK_THROWS_WITH(RendezvousStore("127.0.0.1", server.port(), "another secret, 0123456789", 2s),
                    Catch::Contains("did not prove the run's secret: rank 0 has another NMT_RENDEZVOUS_SECRET"));
  // A client that skips the handshake and sends a request is closed.
  const int raw = open_connection(server.port(), std::string(64, '\x01'));
  REQUIRE(raw >= 0);
  CHECK(closed_within(raw, 2));
  ::close(raw);
  CHECK(store.get("decision/3") == bytes("rank 0's"));
  CHECK(store.getNumKeys() == 1);
  CHECK(eventually([&] { return server.refused() == 2; }));

  // A server with another secret (another program on the port, a forged port) is not believed.
  RendezvousServer impostor("127.0.0.1", 0, "the impostor's secret, 0123456789");
  CHECK_THROWS_WITH(RendezvousStore("127.0.0.1", impostor.port(), kSecret, 2s),
                    Catch::Contains("did not prove the run's secret"));
}

TEST_CASE("rendezvous store: silent and crowding connections neither hold nor fill it", "[distributed]") {
  RendezvousLimits limits;
  limits.handshake = 300ms;
  limits.pending_handshakes = 8;
  RendezvousServer server("127.0.0.1", 0, kSecret, limits);
  // A connection that says nothing, and one that stops halfway through its hello, are closed after
  // the handshake time.
  const int silent = open_connection(server.port(), "");
  const int halfway = open_connection(server.port(), "nmt-rdv1");
  REQUIRE(silent >= 0);
  REQUIRE(halfway >= 0);
  CHECK(closed_within(silent, 2));
  CHECK(closed_within(halfway, 2));
  // Far more silent connections than may wait: the oldest are closed, and a rank still gets in at once.
  std::vector<int> crowd;
  for (int i = 0; i < 100; ++i) crowd.push_back(open_connection(server.port(), ""));
  const auto start = std::chrono::steady_clock::now();
  RendezvousStore store("127.0.0.1", server.port(), kSecret, 5s);
  CHECK(store.add("heartbeat/1", 1) == 1);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK(closed_within(crowd.front(), 1));
  for (int fd : crowd) ::close(fd);
  CHECK(eventually([&] { return server.refused() >= 2 + 100 - 8; }));
}

TEST_CASE("rendezvous store: set, get, add, check, wait, delete and compare-and-set as c10d's stores",
          "[distributed]") {
  RendezvousServer server("127.0.0.1", 0, kSecret);
  RendezvousStore store("127.0.0.1", server.port(), kSecret, 2s);
  const c10::intrusive_ptr<c10d::Store> other = store.clone();  // a connection of its own

  CHECK_FALSE(store.check({"vocabulary"}));
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    other->set("vocabulary", bytes("ab"));
  });
  CHECK(store.get("vocabulary") == bytes("ab"));  // waits for the key
  writer.join();
  CHECK(store.check({"vocabulary"}));
  CHECK_FALSE(store.check({"vocabulary", "absent"}));

  CHECK(store.add("done", 2) == 2);
  CHECK(other->add("done", -1) == 1);
  CHECK(store.get("done") == bytes("1"));  // a counter reads as decimal text, as in a TCPStore
  CHECK_THROWS_WITH(store.add("vocabulary", 1), Catch::Contains("refused an operation on key vocabulary"));

  CHECK(store.compareSet("lock", {}, bytes("mine")) == bytes("mine"));
  CHECK(other->compareSet("lock", bytes("yours"), bytes("theirs")) == bytes("mine"));
  CHECK(other->compareSet("lock", bytes("mine"), bytes("theirs")) == bytes("theirs"));

  CHECK(store.getNumKeys() == 3);
  CHECK(store.deleteKey("lock"));
  CHECK_FALSE(store.deleteKey("lock"));
  CHECK(store.getNumKeys() == 2);

  // A large value (an optimizer's state) whole.
  std::vector<uint8_t> large(8 << 20);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<uint8_t>(i * 7);
  other->set("optimizer", large);
  CHECK(store.get("optimizer") == large);

  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(store.wait({"never"}, 200ms), Catch::Contains("had no value for never within 200 ms"));
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

TEST_CASE("rendezvous store: the secret comes from a file only its owner reads, or the environment", "[distributed]") {
  const char* saved = std::getenv("NMT_RENDEZVOUS_SECRET");
  const std::string environment = saved != nullptr ? saved : "";
  DistributedOptions options;
  options.rank = 0;
  options.world_size = 2;

  ::unsetenv("NMT_RENDEZVOUS_SECRET");
  CHECK_THROWS_WITH(resolve_distributed_options(options), Catch::Contains("set NMT_RENDEZVOUS_SECRET"));
  ::setenv("NMT_RENDEZVOUS_SECRET", "short", 1);
  CHECK_THROWS_WITH(resolve_distributed_options(options),
                    Catch::Contains("NMT_RENDEZVOUS_SECRET: the secret has 5 characters; give at least 16"));
  ::setenv("NMT_RENDEZVOUS_SECRET", kSecret.c_str(), 1);
  resolve_distributed_options(options);
  CHECK(options.secret == kSecret);

  const std::string file = (fs::temp_directory_path() / ("nmt_secret_" + std::to_string(::getpid()))).string();
  write_file_atomic(file, "  from the file, 0123456789  \n second line\n");
  ::chmod(file.c_str(), 0644);
  options.secret_file = file;
  CHECK_THROWS_WITH(resolve_distributed_options(options),
                    Catch::Contains("other users can read or change it: chmod 600"));
  ::chmod(file.c_str(), 0600);
  resolve_distributed_options(options);
  CHECK(options.secret == "from the file, 0123456789");  // the file wins over the environment
  fs::remove(file);
  CHECK_THROWS_WITH(resolve_distributed_options(options), Catch::Contains("cannot read it"));

  if (saved != nullptr) {
    ::setenv("NMT_RENDEZVOUS_SECRET", environment.c_str(), 1);
  } else {
    ::unsetenv("NMT_RENDEZVOUS_SECRET");
  }
}

}  // namespace nmt::testing
