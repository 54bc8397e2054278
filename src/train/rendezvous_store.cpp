// The rendezvous store (rendezvous_store.h): its server on Boost.Asio, one thread, every connection
// a Session; and its client, a c10d::Store on a blocking connection with a deadline on every
// exchange.
//
// After the handshake, both sides hold a session key, HMAC(key, "session" client-nonce
// server-nonce), and the n-th request and its answer each carry two tags under it, one for their
// head alone, checked before any length in it is acted on, and one for the whole:
//   request:  head: op (1 byte), key length (4), first value's length (8), second's (8);
//             HMAC(session key, "request head" n head); the key, the values;
//             HMAC(session key, "request" n head key values)
//   answer:   head: status (1 byte: ok, missing, invalid), payload length (8);
//             HMAC(session key, "answer head" n head); the payload;
//             HMAC(session key, "answer" n head payload)
// Numbers little-endian. A wrong tag ends the connection: a program between a rank and rank 0 that
// passed the handshake along can stop the run, not change what it reads, nor make either side read
// a length it did not send.
#include "train/rendezvous_store.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <charconv>
#include <functional>
#include <list>
#include <map>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace nmt {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

constexpr size_t kNonce = 32;
constexpr size_t kTag = 32;  // HMAC-SHA-256
using Nonce = std::array<uint8_t, kNonce>;
using Tag = std::array<uint8_t, kTag>;
constexpr size_t kSalt = 16;
using Salt = std::array<uint8_t, kSalt>;
constexpr std::array<uint8_t, 8> kMagic = {'n', 'm', 't', '-', 'r', 'd', 'v', '3'};
constexpr uint8_t kAccepted = 1, kRejected = 0;
constexpr size_t kRequestHead = 1 + 4 + 8 + 8;
constexpr size_t kAnswerHead = 1 + 8;
constexpr uint32_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = uint64_t{1} << 34;  // far above an optimizer's state
// Values are read a part at a time, so that memory follows the bytes that came, not a length
// that was announced.
constexpr size_t kReadPart = size_t{4} << 20;
// How many refused connections the server names in the log; later ones are only counted.
constexpr int64_t kRefusalsLogged = 5;

enum Op : uint8_t { kSet = 1, kGet, kAdd, kCheck, kDelete, kCount, kCompareSet };
enum Status : uint8_t { kOk = 0, kMissing = 1, kInvalid = 2 };

template <size_t Size>
std::array<uint8_t, Size> random_bytes() {
  std::array<uint8_t, Size> bytes;
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw std::runtime_error("rendezvous: OpenSSL's random generator failed");
  }
  return bytes;
}
Nonce random_nonce() { return random_bytes<kNonce>(); }

// HMAC-SHA-256 over pieces (OpenSSL's EVP_MAC).
class Mac {
 public:
  template <typename Key>
  explicit Mac(const Key& key) : context_(EVP_MAC_CTX_new(algorithm())) {
    char digest[] = "SHA256";
    const OSSL_PARAM parameters[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                     OSSL_PARAM_construct_end()};
    if (context_ == nullptr ||
        EVP_MAC_init(context_, reinterpret_cast<const unsigned char*>(key.data()), key.size(), parameters) != 1) {
      EVP_MAC_CTX_free(context_);
      throw std::runtime_error("rendezvous: OpenSSL's HMAC-SHA-256 failed");
    }
  }
  ~Mac() { EVP_MAC_CTX_free(context_); }
  Mac(const Mac&) = delete;
  Mac& operator=(const Mac&) = delete;

  Mac& add(const void* data, size_t size) {
    if (size > 0 && EVP_MAC_update(context_, static_cast<const unsigned char*>(data), size) != 1) {
      throw std::runtime_error("rendezvous: OpenSSL's HMAC-SHA-256 failed");
    }
    return *this;
  }
  template <typename Container>
  Mac& add(const Container& bytes) {
    return add(bytes.data(), bytes.size());
  }
  Mac& add_number(uint64_t value) {
    uint8_t bytes[8];
    for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
    return add(bytes, 8);
  }

  Tag finish() {
    Tag tag{};
    size_t length = 0;
    if (EVP_MAC_final(context_, tag.data(), &length, tag.size()) != 1 || length != kTag) {
      throw std::runtime_error("rendezvous: OpenSSL's HMAC-SHA-256 failed");
    }
    return tag;
  }

 private:
  static EVP_MAC* algorithm() {
    static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    return hmac;
  }
  EVP_MAC_CTX* context_;
};

using namespace std::string_view_literals;

// The key the handshake proves: the secret stretched with scrypt under rank 0's salt, so that a
// proof seen on the network costs an attacker 32 MiB and a tenth of a second of this machine per
// secret guessed, not a microsecond. Stretched once per salt in a process (a rank's stores share it).
Tag stretched_key(const std::string& secret, const Salt& salt) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, Salt>, Tag> done;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = done.find({secret, salt});
  if (found != done.end()) return found->second;
  constexpr uint64_t kCost = uint64_t{1} << 15, kBlock = 8, kParallel = 1, kMemory = uint64_t{64} << 20;
  Tag key{};
  if (EVP_PBE_scrypt(secret.data(), secret.size(), salt.data(), salt.size(), kCost, kBlock, kParallel, kMemory,
                     key.data(), key.size()) != 1) {
    throw std::runtime_error("rendezvous: OpenSSL's scrypt failed");
  }
  if (done.size() > 64) done.clear();
  done.emplace(std::make_pair(secret, salt), key);
  return key;
}

// What one side sends to show that it knows the key, and the key both then tag messages with. The
// connecting side proves first: a stranger who connects learns nothing that would check a guess.
Tag server_proof(const Tag& key, const Nonce& client, const Nonce& server) {
  return Mac(key).add("server"sv).add(client).add(server).finish();
}
Tag client_proof(const Tag& key, const Nonce& client, const Nonce& server) {
  return Mac(key).add("client"sv).add(server).add(client).finish();
}
Tag session_key(const Tag& key, const Nonce& client, const Nonce& server) {
  return Mac(key).add("session"sv).add(client).add(server).finish();
}

bool same(const Tag& expected, const uint8_t* received) { return CRYPTO_memcmp(expected.data(), received, kTag) == 0; }

void put_number(uint8_t* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t read_number(const uint8_t* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= uint64_t{in[i]} << (8 * i);
  return value;
}

Bytes number_bytes(int64_t value) {
  Bytes bytes(8);
  put_number(bytes.data(), static_cast<uint64_t>(value), 8);
  return bytes;
}

std::string address_of(const tcp::socket& socket) {
  error_code error;
  const tcp::endpoint peer = socket.remote_endpoint(error);
  return error ? std::string("a closed connection") : peer.address().to_string() + ":" + std::to_string(peer.port());
}

// Asks `ready` until it says yes, pausing a little longer each time (at most 20 ms); throws naming
// `what` once `timeout` (kNoTimeout: none) has passed.
template <typename Ready>
void poll_until(Ready ready, std::chrono::milliseconds timeout, const std::string& address, const std::string& what) {
  const auto start = Clock::now();
  auto pause = std::chrono::milliseconds(1);
  while (!ready()) {
    if (timeout != c10d::Store::kNoTimeout && Clock::now() - start >= timeout) {
      throw std::runtime_error("the rendezvous at " + address + " had no value for " + what + " within " +
                               std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string random_secret() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string secret;
  for (uint8_t byte : random_nonce()) secret += {kHex[byte >> 4], kHex[byte & 15]};
  return secret;
}

// ---- The server ----

class RendezvousServer::Server {
 public:
  Server(const std::string& host, int port, const std::string& secret, RendezvousLimits limits)
      : salt_(random_bytes<kSalt>()), key_(stretched_key(secret, salt_)), limits_(limits) {
    if (limits_.pending_handshakes < 1) throw std::invalid_argument("rendezvous: pending_handshakes must be 1 or more");
    const std::string address = host + ":" + std::to_string(port);
    tcp::endpoint endpoint;
    try {
      tcp::resolver resolver(io_);
      endpoint = resolver.resolve(host, std::to_string(port))->endpoint();
      acceptor_.open(endpoint.protocol());
      acceptor_.set_option(net::socket_base::reuse_address(true));
      acceptor_.bind(endpoint);
      acceptor_.listen();
      port_ = acceptor_.local_endpoint().port();
    } catch (const std::exception& error) {
      throw std::runtime_error("cannot listen on " + address + ": " + error.what());
    }
    if (endpoint.address().is_loopback() && !is_loopback_host(host)) {
      spdlog::warn(
          "rendezvous: {} is {} on this machine, a loopback address that no other machine reaches; for "
          "ranks on other machines give rank 0's IP address as --master-addr (MASTER_ADDR)",
          host, endpoint.address().to_string());
    }
    accept();
    // A handler that throws (out of memory, say) ends its connection, not the server.
    thread_ = std::thread([this] {
      while (true) {
        try {
          io_.run();
          return;
        } catch (const std::exception& error) {
          spdlog::warn("rendezvous: a connection failed: {}", error.what());
        }
      }
    });
  }

  ~Server() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  int64_t refused() const { return refused_; }

  void refuse(const std::string& from, const std::string& why) {
    const int64_t count = ++refused_;
    if (count <= kRefusalsLogged) {
      spdlog::warn("rendezvous: closed a connection from {}: {}{}", from, why,
                   count == kRefusalsLogged ? " (further refusals are not logged)" : "");
    }
  }

  const Salt& salt() const { return salt_; }
  const Tag& key() const { return key_; }
  const RendezvousLimits& limits() const { return limits_; }
  std::map<std::string, Bytes>& data() { return data_; }

 private:
  class Session;
  void accept();

  const Salt salt_;
  const Tag key_;  // the secret stretched under salt_
  const RendezvousLimits limits_;
  int port_ = 0;
  net::io_context io_;
  tcp::acceptor acceptor_{io_};
  net::steady_timer retry_{io_};
  std::map<std::string, Bytes> data_;          // touched on the server's thread only
  std::list<std::weak_ptr<Session>> pending_;  // connections in their handshake, oldest first
  std::atomic<int64_t> refused_{0};
  std::thread thread_;
};

class RendezvousServer::Server::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server& server)
      : socket_(std::move(socket)), deadline_(socket_.get_executor()), server_(server), from_(address_of(socket_)) {}

  bool authenticated() const { return authenticated_; }

  void start() {
    deadline_.expires_after(server_.limits().handshake);
    deadline_.async_wait([self = shared_from_this()](error_code error) {
      if (!error && !self->authenticated_) self->refuse("it did not finish the handshake in time");
    });
    read(hello_, [this] { greet(); });
  }

  void refuse(const std::string& why) {
    if (!socket_.is_open()) return;
    server_.refuse(from_, why);
    close();
  }

 private:
  void close() {
    error_code ignored;
    deadline_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // Reads `buffer` whole, then runs `then`; a connection that ends first is refused while in its
  // handshake and simply closed after it.
  template <typename Buffer, typename Then>
  void read(Buffer& buffer, Then then) {
    net::async_read(socket_, net::buffer(buffer), [self = shared_from_this(), then](error_code error, size_t) {
      if (!error) return then();
      if (!self->authenticated_) self->refuse("it left during the handshake");
    });
  }

  // Reads `size` bytes into `value` a part at a time, then runs `then`.
  void read_value(Bytes& value, uint64_t size, std::function<void()> then) {
    const size_t have = value.size();
    if (have == size) return then();
    const size_t part = static_cast<size_t>(std::min<uint64_t>(size - have, kReadPart));
    value.resize(have + part);
    net::async_read(socket_, net::buffer(value.data() + have, part),
                    [self = shared_from_this(), &value, size, then](error_code error, size_t) {
                      if (!error) self->read_value(value, size, then);
                    });
  }

  void write(const Bytes& bytes, std::function<void()> then) {
    net::async_write(socket_, net::buffer(bytes), [self = shared_from_this(), then](error_code error, size_t) {
      if (!error) then();
    });
  }

  // The client's hello read: the salt and the server's nonce back, and no proof yet.
  void greet() {
    if (!std::equal(kMagic.begin(), kMagic.end(), hello_.begin())) {
      refuse("its first message is not an nmt rendezvous handshake");
      return;
    }
    std::copy(hello_.begin() + kMagic.size(), hello_.end(), client_nonce_.begin());
    server_nonce_ = random_nonce();
    answer_.assign(server_.salt().begin(), server_.salt().end());
    answer_.insert(answer_.end(), server_nonce_.begin(), server_nonce_.end());
    write(answer_, [this] { read(received_tag_, [this] { check_proof(); }); });
  }

  void check_proof() {
    if (!same(client_proof(server_.key(), client_nonce_, server_nonce_), received_tag_.data())) {
      // Said before closing, so that the client can tell a refusal from a connection cut short.
      answer_.assign(1, kRejected);
      write(answer_, [this] { refuse("it did not prove the run's secret"); });
      return;
    }
    authenticated_ = true;
    deadline_.cancel();
    key_ = session_key(server_.key(), client_nonce_, server_nonce_);
    const Tag proof = server_proof(server_.key(), client_nonce_, server_nonce_);
    answer_.assign(1, kAccepted);
    answer_.insert(answer_.end(), proof.begin(), proof.end());
    write(answer_, [this] { read_request(); });
  }

  void read_request() {
    read(head_, [this] { read(received_tag_, [this] { check_head(); }); });
  }

  // The head's own tag, before its lengths decide what is read.
  void check_head() {
    if (!same(Mac(key_).add("request head"sv).add_number(sequence_).add(head_).finish(), received_tag_.data())) {
      return refuse("a request's tag is wrong: something between it and this rank altered it");
    }
    {
      const uint64_t key_length = read_number(head_.data() + 1, 4);
      const uint64_t first_length = read_number(head_.data() + 5, 8);
      const uint64_t second_length = read_number(head_.data() + 13, 8);
      if (head_[0] < kSet || head_[0] > kCompareSet || key_length > kMaxKey || first_length > kMaxValue ||
          second_length > kMaxValue) {
        return refuse("it sent a malformed request");
      }
      name_.clear(), first_.clear(), second_.clear();
      read_value(name_, key_length, [this, first_length, second_length] {
        read_value(first_, first_length, [this, second_length] {
          read_value(second_, second_length, [this] { read(received_tag_, [this] { answer_request(); }); });
        });
      });
    }
  }

  void answer_request() {
    const Tag expected =
        Mac(key_).add("request"sv).add_number(sequence_).add(head_).add(name_).add(first_).add(second_).finish();
    if (!same(expected, received_tag_.data())) {
      return refuse("a request's tag is wrong: something between it and this rank altered it");
    }
    answer();
    std::array<uint8_t, kAnswerHead> head{};
    std::copy(answer_.begin(), answer_.begin() + kAnswerHead, head.begin());
    const Tag head_tag = Mac(key_).add("answer head"sv).add_number(sequence_).add(head).finish();
    const Tag tag = Mac(key_)
                        .add("answer"sv)
                        .add_number(sequence_)
                        .add(head)
                        .add(answer_.data() + kAnswerHead, answer_.size() - kAnswerHead)
                        .finish();
    answer_.insert(answer_.begin() + kAnswerHead, head_tag.begin(), head_tag.end());
    answer_.insert(answer_.end(), tag.begin(), tag.end());
    ++sequence_;
    write(answer_, [this] { read_request(); });
  }

  void reply(uint8_t status, const Bytes& payload = {}) {
    answer_.assign(kAnswerHead, 0);
    answer_[0] = status;
    put_number(answer_.data() + 1, payload.size(), 8);
    answer_.insert(answer_.end(), payload.begin(), payload.end());
  }

  // The request read and its tag checked: its answer, without a tag, in answer_.
  void answer() {
    std::map<std::string, Bytes>& data = server_.data();
    const std::string key(name_.begin(), name_.end());
    const auto found = data.find(key);
    switch (head_[0]) {
      case kSet:
        data[key] = std::move(first_);
        return reply(kOk);
      case kGet:
        return found == data.end() ? reply(kMissing) : reply(kOk, found->second);
      case kAdd: {
        // A counter is kept as decimal text, as c10d's TCPStore keeps it.
        int64_t value = 0;
        if (first_.size() != 8) return reply(kInvalid);
        if (found != data.end()) {
          const auto* text = reinterpret_cast<const char*>(found->second.data());
          const auto end = text + found->second.size();
          const auto [stop, error] = std::from_chars(text, end, value);
          if (error != std::errc() || stop != end) return reply(kInvalid);
        }
        if (__builtin_add_overflow(value, static_cast<int64_t>(read_number(first_.data(), 8)), &value)) {
          return reply(kInvalid);
        }
        const std::string text = std::to_string(value);
        data[key] = Bytes(text.begin(), text.end());
        return reply(kOk, number_bytes(value));
      }
      case kCheck:
        return reply(kOk, Bytes{found != data.end()});
      case kDelete:
        return reply(kOk, Bytes{static_cast<uint8_t>(data.erase(key))});
      case kCount:
        return reply(kOk, number_bytes(static_cast<int64_t>(data.size())));
      case kCompareSet:
        // As c10d's stores: the desired value is set when the current one is the expected one (a
        // missing key counts as an empty value); the answer is the value the key now holds.
        if ((found == data.end() && first_.empty()) || (found != data.end() && found->second == first_)) {
          data[key] = second_;
          return reply(kOk, second_);
        }
        return reply(kOk, found == data.end() ? first_ : found->second);
    }
  }

  tcp::socket socket_;
  net::steady_timer deadline_;
  Server& server_;
  const std::string from_;
  bool authenticated_ = false;
  std::array<uint8_t, kMagic.size() + kNonce> hello_{};
  Nonce client_nonce_{}, server_nonce_{};
  Tag received_tag_{}, key_{};
  uint64_t sequence_ = 0;
  std::array<uint8_t, kRequestHead> head_{};
  Bytes name_, first_, second_, answer_;
};

void RendezvousServer::Server::accept() {
  acceptor_.async_accept([this](error_code error, tcp::socket socket) {
    if (error == net::error::operation_aborted) return;
    if (error) {  // out of descriptors, for example: try again in a moment rather than spin
      retry_.expires_after(std::chrono::milliseconds(50));
      retry_.async_wait([this](error_code error) {
        if (!error) accept();
      });
      return;
    }
    pending_.remove_if([](const std::weak_ptr<Session>& weak) {
      const auto session = weak.lock();
      return session == nullptr || session->authenticated();
    });
    if (pending_.size() >= limits_.pending_handshakes) {
      if (const auto oldest = pending_.front().lock()) oldest->refuse("too many connections in their handshake");
      pending_.pop_front();
    }
    auto session = std::make_shared<Session>(std::move(socket), *this);
    pending_.push_back(session);
    session->start();
    accept();
  });
}

RendezvousServer::RendezvousServer(const std::string& host, int port, const std::string& secret,
                                   RendezvousLimits limits)
    : server_(std::make_unique<Server>(host, port, secret, limits)) {}

RendezvousServer::~RendezvousServer() = default;

int RendezvousServer::port() const { return server_->port(); }

int64_t RendezvousServer::refused() const { return server_->refused(); }

// ---- The client ----

// A blocking connection whose every exchange has a deadline: each operation is started
// asynchronously and the context run until it completes or the time is up.
class RendezvousStore::Connection {
 public:
  Connection(const std::string& host, int port, const std::string& secret, std::chrono::milliseconds timeout)
      : address_(host + ":" + std::to_string(port)) {
    const auto deadline = Clock::now() + timeout;
    std::string last_error = "nothing listens there";
    while (true) {
      try {
        connect(host, port, deadline);
        handshake(secret, deadline);
        return;
      } catch (const RendezvousRefused&) {
        throw;
      } catch (const std::exception& error) {  // not there yet, or a handshake cut short: again
        last_error = error.what();
      }
      if (Clock::now() + std::chrono::milliseconds(100) >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("cannot reach the rendezvous at " + address_ + " (" + last_error + ")");
  }

  const std::string& address() const { return address_; }

  // One request and its answer, both tagged; `timeout` 0: no deadline.
  Bytes exchange(const std::array<uint8_t, kRequestHead>& head, const std::string& name, const Bytes& first,
                 const Bytes& second, Status& status, std::chrono::milliseconds timeout) {
    const Tag head_tag = Mac(key_).add("request head"sv).add_number(sequence_).add(head).finish();
    const Tag tag =
        Mac(key_).add("request"sv).add_number(sequence_).add(head).add(name).add(first).add(second).finish();
    write({net::buffer(head), net::buffer(head_tag), net::buffer(name), net::buffer(first), net::buffer(second),
           net::buffer(tag)},
          timeout);
    std::array<uint8_t, kAnswerHead> answer{};
    read(net::buffer(answer), timeout);
    Tag received{};
    read(net::buffer(received), timeout);
    if (!same(Mac(key_).add("answer head"sv).add_number(sequence_).add(answer).finish(), received.data())) {
      fail("an answer whose tag is wrong: something between this rank and rank 0 altered it");
    }
    const uint64_t length = read_number(answer.data() + 1, 8);
    if (answer[0] > kInvalid || length > kMaxValue) fail("a malformed answer");
    Bytes payload;
    while (payload.size() < length) {
      const size_t have = payload.size();
      const size_t part = static_cast<size_t>(std::min<uint64_t>(length - have, kReadPart));
      payload.resize(have + part);
      read(net::buffer(payload.data() + have, part), timeout);
    }
    read(net::buffer(received), timeout);
    const Tag expected = Mac(key_).add("answer"sv).add_number(sequence_).add(answer).add(payload).finish();
    if (!same(expected, received.data())) {
      fail("an answer whose tag is wrong: something between this rank and rank 0 altered it");
    }
    ++sequence_;
    status = static_cast<Status>(answer[0]);
    return payload;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    broken_ = true;
    throw std::runtime_error("the rendezvous at " + address_ + " sent " + what);
  }

  void connect(const std::string& host, int port, Clock::time_point deadline) {
    error_code error;
    socket_.close(error);
    broken_ = false;
    tcp::resolver resolver(io_);
    const auto endpoints = resolver.resolve(host, std::to_string(port));
    run(
        [&](auto done) {
          net::async_connect(socket_, endpoints, [done](error_code e, const tcp::endpoint&) { done(e, 0); });
        },
        remaining(deadline));
  }

  void handshake(const std::string& secret, Clock::time_point deadline) {
    const Nonce nonce = random_nonce();
    std::array<uint8_t, kMagic.size() + kNonce> hello{};
    std::copy(kMagic.begin(), kMagic.end(), hello.begin());
    std::copy(nonce.begin(), nonce.end(), hello.begin() + kMagic.size());
    write({net::buffer(hello)}, remaining(deadline));
    std::array<uint8_t, kSalt + kNonce> reply{};
    read(net::buffer(reply), remaining(deadline));
    Salt salt{};
    Nonce server_nonce{};
    std::copy(reply.begin(), reply.begin() + kSalt, salt.begin());
    std::copy(reply.begin() + kSalt, reply.end(), server_nonce.begin());
    const Tag key = stretched_key(secret, salt);
    const Tag proof = client_proof(key, nonce, server_nonce);
    write({net::buffer(proof)}, remaining(deadline));
    std::array<uint8_t, 1 + kTag> verdict{};
    read(net::buffer(verdict.data(), 1), remaining(deadline));
    if (verdict[0] != kAccepted) {
      throw RendezvousRefused("rank 0 at " + address_ +
                              " refused this rank's proof of the run's secret: give every rank the same "
                              "NMT_RENDEZVOUS_SECRET (or --rendezvous-secret-file)");
    }
    read(net::buffer(verdict.data() + 1, kTag), remaining(deadline));
    if (!same(server_proof(key, nonce, server_nonce), verdict.data() + 1)) {
      throw RendezvousRefused("the rendezvous at " + address_ +
                              " did not prove the run's secret: another program listens there (the port may be "
                              "forged, or rank 0 is not this run's)");
    }
    key_ = session_key(key, nonce, server_nonce);
    sequence_ = 0;
  }

  static std::chrono::milliseconds remaining(Clock::time_point deadline) {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                    std::chrono::milliseconds(1));
  }

  void write(const std::vector<net::const_buffer>& buffers, std::chrono::milliseconds timeout) {
    run([&](auto done) { net::async_write(socket_, buffers, done); }, timeout);
  }

  void read(net::mutable_buffer buffer, std::chrono::milliseconds timeout) {
    run([&](auto done) { net::async_read(socket_, buffer, done); }, timeout);
  }

  template <typename Start>
  void run(Start start, std::chrono::milliseconds timeout) {
    if (broken_) throw std::runtime_error("the connection to the rendezvous at " + address_ + " broke earlier");
    error_code result = net::error::would_block;
    start([&result](error_code error, size_t) { result = error; });
    io_.restart();
    if (timeout == c10d::Store::kNoTimeout) {
      io_.run();
    } else {
      io_.run_for(timeout);
    }
    if (!io_.stopped()) {  // the time is up: end the operation, and the connection with it
      error_code ignored;
      socket_.close(ignored);
      io_.restart();
      io_.run();
      broken_ = true;
      throw std::runtime_error("the rendezvous at " + address_ + " did not answer in time");
    }
    if (result) {
      broken_ = true;
      throw std::runtime_error("the connection to the rendezvous at " + address_ + " failed: " + result.message());
    }
  }

  const std::string address_;
  net::io_context io_;
  tcp::socket socket_{io_};
  bool broken_ = false;
  Tag key_{};
  uint64_t sequence_ = 0;
};

RendezvousStore::RendezvousStore(const std::string& host, int port, const std::string& secret,
                                 std::chrono::milliseconds timeout)
    : c10d::Store(timeout),
      host_(host),
      secret_(secret),
      port_(port),
      connection_(std::make_unique<Connection>(host, port, secret, timeout)) {}

RendezvousStore::~RendezvousStore() = default;

std::vector<uint8_t> RendezvousStore::request(uint8_t op, const std::string& key, const Bytes& first,
                                              const Bytes& second, Status& status) {
  if (key.size() > kMaxKey)
    throw std::invalid_argument("rendezvous: a key of " + std::to_string(key.size()) + " bytes");
  std::array<uint8_t, kRequestHead> head{};
  head[0] = op;
  put_number(head.data() + 1, key.size(), 4);
  put_number(head.data() + 5, first.size(), 8);
  put_number(head.data() + 13, second.size(), 8);
  const std::lock_guard<std::mutex> lock(mutex_);
  return connection_->exchange(head, key, first, second, status, timeout_);
}

std::vector<uint8_t> RendezvousStore::request_ok(uint8_t op, const std::string& key, const Bytes& first,
                                                 const Bytes& second) {
  Status status = Status::ok;
  Bytes payload = request(op, key, first, second, status);
  if (status != Status::ok) {
    throw std::runtime_error("the rendezvous at " + connection_->address() + " refused an operation on key " + key +
                             (op == kAdd ? " (it holds something other than a count, or the count overflowed)" : ""));
  }
  return payload;
}

void RendezvousStore::set(const std::string& key, const std::vector<uint8_t>& value) { request_ok(kSet, key, value); }

std::vector<uint8_t> RendezvousStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                                 const std::vector<uint8_t>& desired) {
  return request_ok(kCompareSet, key, expected, desired);
}

std::vector<uint8_t> RendezvousStore::get(const std::string& key) {
  Bytes value;
  const auto found = [&] {
    Status status = Status::ok;
    value = request(kGet, key, {}, {}, status);
    return status == Status::ok;
  };
  poll_until(found, timeout_, connection_->address(), key);
  return value;
}

int64_t RendezvousStore::add(const std::string& key, int64_t value) {
  const Bytes payload = request_ok(kAdd, key, number_bytes(value));
  if (payload.size() != 8) {
    throw std::runtime_error("the rendezvous at " + connection_->address() + " sent a malformed count");
  }
  return static_cast<int64_t>(read_number(payload.data(), 8));
}

bool RendezvousStore::deleteKey(const std::string& key) {
  const Bytes payload = request_ok(kDelete, key);
  return !payload.empty() && payload[0] != 0;
}

bool RendezvousStore::check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    const Bytes payload = request_ok(kCheck, key);
    if (payload.empty() || payload[0] == 0) return false;
  }
  return true;
}

int64_t RendezvousStore::getNumKeys() {
  const Bytes payload = request_ok(kCount, "");
  if (payload.size() != 8) {
    throw std::runtime_error("the rendezvous at " + connection_->address() + " sent a malformed count");
  }
  return static_cast<int64_t>(read_number(payload.data(), 8));
}

void RendezvousStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void RendezvousStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::string names;
  for (const std::string& key : keys) names += (names.empty() ? "" : ", ") + key;
  poll_until([&] { return check(keys); }, timeout, connection_->address(), names);
}

c10::intrusive_ptr<c10d::Store> RendezvousStore::clone() {
  return c10::make_intrusive<RendezvousStore>(host_, port_, secret_, timeout_);
}

}  // namespace nmt
