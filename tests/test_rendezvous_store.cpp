// The rendezvous store (train/rendezvous_store.h) as a client on the network would try it: the
// address it listens on, clients and servers that do not know the secret, silent and crowding
// connections, a program between a rank and rank 0 that alters a byte; and the store's own
// semantics, which c10d's process groups rely on.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
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
  bool closed = false;
  read_until_closed(fd, seconds, closed);
  return closed;
}

// Reads exactly `size` bytes from `fd` within a few seconds; what it got.
std::string receive(int fd, size_t size) {
  std::string got;
  char buffer[256];
  while (got.size() < size) {
    pollfd item{fd, POLLIN, 0};
    if (::poll(&item, 1, 3000) != 1) break;
    const ssize_t count = ::recv(fd, buffer, std::min(sizeof(buffer), size - got.size()), 0);
    if (count <= 0) break;
    got.append(buffer, count);
  }
  return got;
}

// A program between a rank and rank 0 that passes the bytes of one connection along both ways,
// and flips the lowest bit of byte `flip` of one direction (counted from the connection's start).
class Relay {
 public:
  Relay(int server_port, bool toward_server, size_t flip) {
    port_ = loopback_port(&listener_);
    thread_ = std::thread([=] { pass(server_port, toward_server, flip); });
  }
  ~Relay() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }

 private:
  void pass(int server_port, bool toward_server, size_t flip) {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = open_connection(server_port, "");
    pollfd ends[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    size_t passed[2] = {0, 0};  // bytes from the client, from the server
    char buffer[1 << 16];
    for (bool open = server >= 0; open && ::poll(ends, 2, 5000) > 0;) {
      for (int from = 0; from < 2 && open; ++from) {
        if (ends[from].revents == 0) continue;
        const ssize_t count = ::recv(ends[from].fd, buffer, sizeof(buffer), 0);
        open = count > 0;
        if (!open) break;
        if ((from == 0) == toward_server && flip >= passed[from] && flip < passed[from] + count) {
          buffer[flip - passed[from]] ^= 1;
        }
        passed[from] += count;
        ::send(ends[1 - from].fd, buffer, count, MSG_NOSIGNAL);
      }
    }
    ::close(client);
    if (server >= 0) ::close(server);
  }

  int listener_ = -1, port_ = 0;
  std::thread thread_;
};

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

  // A client with another secret is refused before it can read or write anything.
  CHECK_THROWS_WITH(RendezvousStore("127.0.0.1", server.port(), "another secret, 0123456789", 2s),
                    Catch::Contains("refused this rank's proof of the run's secret"));
  // A stranger gets the salt and a nonce, nothing computed from the secret: it must prove first,
  // and a wrong proof is told so before the connection closes, with no proof of the server's.
  const int guesser = open_connection(server.port(), "nmt-rdv3" + std::string(32, 'n'));
  REQUIRE(guesser >= 0);
  const std::string first = receive(guesser, 48);
  CHECK(first.size() == 48);
  REQUIRE(::send(guesser, std::string(32, 'p').data(), 32, MSG_NOSIGNAL) == 32);
  CHECK(receive(guesser, 64) == std::string(1, '\0'));
  CHECK(closed_within(guesser, 2));
  ::close(guesser);
  // The same nonce again: a fresh server nonce, the same salt (a connection's first answer is no
  // function of what the stranger sends but the run's salt).
  const int again = open_connection(server.port(), "nmt-rdv3" + std::string(32, 'n'));
  REQUIRE(again >= 0);
  const std::string second = receive(again, 48);
  CHECK(second.substr(0, 16) == first.substr(0, 16));
  CHECK(second.substr(16) != first.substr(16));
  ::close(again);
  // A client that skips the handshake and sends a request is closed.
  const int raw = open_connection(server.port(), std::string(64, '\x01'));
  REQUIRE(raw >= 0);
  CHECK(closed_within(raw, 2));
  ::close(raw);
  CHECK(store.get("decision/3") == bytes("rank 0's"));
  CHECK(store.getNumKeys() == 1);
  CHECK(eventually([&] { return server.refused() == 4; }));

  // A server with another secret refuses the rank; one that does not know the secret and accepts
  // anything (another program on the port, a forged port) is not believed.
  RendezvousServer impostor("127.0.0.1", 0, "the impostor's secret, 0123456789");
  CHECK_THROWS_WITH(RendezvousStore("127.0.0.1", impostor.port(), kSecret, 2s),
                    Catch::Contains("refused this rank's proof"));
  int listener = -1;
  const int port = loopback_port(&listener);
  std::thread accepting([listener] {
    const int rank = ::accept(listener, nullptr, nullptr);
    receive(rank, 40);
    ::send(rank, std::string(48, 's').data(), 48, MSG_NOSIGNAL);
    receive(rank, 32);  // the rank's proof, under a key stretched from the secret
    const std::string accepted = std::string(1, '\1') + std::string(32, 't');
    ::send(rank, accepted.data(), accepted.size(), MSG_NOSIGNAL);
    receive(rank, 1);
    ::close(rank);
  });
  CHECK_THROWS_WITH(RendezvousStore("127.0.0.1", port, kSecret, 2s),
                    Catch::Contains("did not prove the run's secret: another program listens there"));
  accepting.join();
  ::close(listener);
}

TEST_CASE("rendezvous store: silent and crowding connections neither hold nor fill it", "[distributed]") {
  RendezvousLimits limits;
  limits.handshake = 300ms;
  RendezvousServer server("127.0.0.1", 0, kSecret, limits);
  // A connection that says nothing, and one that stops halfway through its hello, are closed after
  // the handshake time.
  const int silent = open_connection(server.port(), "");
  const int halfway = open_connection(server.port(), "nmt-rdv2");
  REQUIRE(silent >= 0);
  REQUIRE(halfway >= 0);
  CHECK(closed_within(silent, 2));
  CHECK(closed_within(halfway, 2));
  ::close(silent);
  ::close(halfway);

  // Far more silent connections than may wait (with a handshake time longer than the test): the
  // oldest are closed at once, the newest stay, and a rank still gets in.
  limits.handshake = 60s;
  limits.pending_handshakes = 8;
  RendezvousServer crowded("127.0.0.1", 0, kSecret, limits);
  std::vector<int> crowd;
  for (int i = 0; i < 100; ++i) crowd.push_back(open_connection(crowded.port(), ""));
  CHECK(closed_within(crowd.front(), 2));
  CHECK(eventually([&] { return crowded.refused() == 100 - 8; }));
  CHECK_FALSE(closed_within(crowd.back(), 0.2));
  RendezvousStore store("127.0.0.1", crowded.port(), kSecret, 10s);
  CHECK(store.add("heartbeat/1", 1) == 1);
  for (int fd : crowd) ::close(fd);
}

TEST_CASE("rendezvous store: a program between a rank and rank 0 can stop it but not change what it reads",
          "[distributed]") {
  RendezvousServer server("127.0.0.1", 0, kSecret);
  RendezvousStore direct("127.0.0.1", server.port(), kSecret, 5s);
  constexpr size_t kHandshakeFromClient = 8 + 32 + 32, kHandshakeFromServer = 16 + 32 + 1 + 32;
  {
    // A byte of the first request's key flipped on its way: the server closes the connection and
    // stores nothing.
    Relay relay(server.port(), true, kHandshakeFromClient + 21 + 32 + 1);
    RendezvousStore relayed("127.0.0.1", relay.port(), kSecret, 5s);
    CHECK_THROWS(relayed.set("decision/3", bytes("rank 0's")));
  }
  CHECK(direct.getNumKeys() == 0);
  CHECK(eventually([&] { return server.refused() == 1; }));
  {
    // The highest byte of the first value's length flipped (it would announce 2^56 more bytes):
    // the head's own tag is wrong, so the server refuses the connection at once instead of
    // waiting to read what was announced.
    Relay relay(server.port(), true, kHandshakeFromClient + 5 + 7);
    RendezvousStore relayed("127.0.0.1", relay.port(), kSecret, 5s);
    CHECK_THROWS(relayed.set("decision/3", bytes("rank 0's")));
  }
  CHECK(eventually([&] { return server.refused() == 2; }));
  {
    // A byte of the first answer flipped: the rank refuses it.
    direct.set("decision/3", bytes("rank 0's"));
    Relay relay(server.port(), false, kHandshakeFromServer + 9);
    RendezvousStore relayed("127.0.0.1", relay.port(), kSecret, 5s);
    CHECK_THROWS_WITH(relayed.get("decision/3"), Catch::Contains("an answer whose tag is wrong"));
  }
  {
    // Passed along untouched, it works: the tags are not what fails above.
    Relay relay(server.port(), true, size_t{1} << 40);
    RendezvousStore relayed("127.0.0.1", relay.port(), kSecret, 5s);
    CHECK(relayed.get("decision/3") == bytes("rank 0's"));
  }
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
  CHECK_THROWS_WITH(store.add("done", std::numeric_limits<int64_t>::max()), Catch::Contains("the count overflowed"));
  CHECK(store.add("done", 0) == 1);

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
  CHECK_THROWS_WITH(resolve_distributed_options(options), Catch::Contains("other users can read or change it"));
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
