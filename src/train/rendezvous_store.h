// The store the ranks of a distributed run meet in (rendezvous.h): a c10d::Store whose server,
// hosted by rank 0, listens on --master-addr alone and serves a connection only once it has proved
// the run's shared secret, and which proves the secret back, so that a rank takes no value from a
// program that does not know it.
//
// The handshake proves K, the secret stretched with scrypt (N = 2^15, r = 8, p = 1: 32 MiB and about
// a tenth of a second) under a random salt rank 0 draws when it starts; the secret itself never
// crosses the network. The connecting side proves first, so that a stranger who connects to rank 0
// gets nothing that would check a guess of the secret offline:
//   client -> server   "nmt-rdv3", the client's nonce (32 bytes)
//   server -> client   the salt (16), the server's nonce (32)
//   client -> server   HMAC(K, "client" server-nonce client-nonce)
//   server -> client   refused: one byte 0, then the connection closes; accepted: one byte 1 and
//                      HMAC(K, "server" client-nonce server-nonce)
// A program that poses as rank 0 (another program on the port, a forged MASTER_PORT) can get a
// rank's proof; to test a guessed secret against it, it pays the stretch for every guess.
// Then every request and answer carries a tag of its head and a tag of the whole, under a key both
// sides derive from the handshake, with its sequence number (rendezvous_store.cpp), so that a
// program that passes the handshake along between a rank and rank 0 cannot change what either
// reads, nor make either read a length the other did not send. The traffic is not encrypted.
//
// A connection that has not finished the handshake within RendezvousLimits::handshake is closed,
// and so is the oldest unfinished one when a new connection would make more than
// `pending_handshakes`. After it, the client's requests (set, get, add, check, delete, the number
// of keys, compare-and-set) are answered in order; a get or wait for a key that is not there yet is
// asked again until the store's timeout.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace nmt {

// A refusal that trying again will not change: the server did not prove the secret, or refused
// this side's proof.
struct RendezvousRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether `host` names this machine's loopback (localhost, 127.x.x.x, ::1).
bool is_loopback_host(const std::string& host);

// 64 hex digits from OpenSSL's random generator: the secret nmt train --nproc gives its ranks.
std::string random_secret();

struct RendezvousLimits {
  std::chrono::milliseconds handshake{5000};  // from the connection to the accepting byte
  size_t pending_handshakes = 64;             // connections that have not finished it
};

class RendezvousServer {
 public:
  // Listens on host:port (port 0: one the kernel picks) and serves on a thread of its own. Throws
  // std::runtime_error naming the address when it cannot listen there.
  RendezvousServer(const std::string& host, int port, const std::string& secret, RendezvousLimits limits = {});
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  int port() const;
  // Connections closed before they proved the secret: a wrong proof, a wrong first message, a
  // silence past the handshake time, or the oldest of too many.
  int64_t refused() const;

 private:
  class Server;
  std::unique_ptr<Server> server_;
};

class RendezvousStore : public c10d::Store {
 public:
  // Connects to host:port within `timeout` (trying again while nothing listens there yet, as ranks
  // start before rank 0 does) and does the handshake. Throws RendezvousRefused when the server
  // does not prove the secret or refuses this side's proof, std::runtime_error when nothing answers
  // in time.
  RendezvousStore(const std::string& host, int port, const std::string& secret, std::chrono::milliseconds timeout);
  ~RendezvousStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  // Waits for the key up to the store's timeout.
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // A store of its own connection to the same server (LibTorch 2.5 on asks for one).
  c10::intrusive_ptr<c10d::Store> clone();

 private:
  class Connection;
  enum class Status : uint8_t { ok = 0, missing = 1, invalid = 2 };
  std::vector<uint8_t> request(uint8_t op, const std::string& key, const std::vector<uint8_t>& first,
                               const std::vector<uint8_t>& second, Status& status);
  std::vector<uint8_t> request_ok(uint8_t op, const std::string& key, const std::vector<uint8_t>& first = {},
                                  const std::vector<uint8_t>& second = {});

  std::string host_, secret_;
  int port_ = 0;
  std::mutex mutex_;  // one request at a time on the connection
  std::unique_ptr<Connection> connection_;
};

}  // namespace nmt
