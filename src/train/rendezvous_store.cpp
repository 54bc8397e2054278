// The rendezvous store (rendezvous_store.h): its server on Boost.Asio, one thread, every connection
// a Session; and its client, a c10d::Store on a blocking connection with a deadline on every
// exchange.
//
// A request:  op (1 byte), key length (4), first value's length (8), second's (8); then the key and
//             the values. Numbers little-endian.
// An answer:  status (1 byte: ok, missing, invalid), payload length (8), payload.
#include "train/rendezvous_store.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <charconv>
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

constexpr std::array<uint8_t, 8> kMagic = {'n', 'm', 't', '-', 'r', 'd', 'v', '1'};
constexpr size_t kNonce = 32;
constexpr size_t kProof = 32;  // HMAC-SHA-256
constexpr size_t kRequestHead = 1 + 4 + 8 + 8;
constexpr size_t kAnswerHead = 1 + 8;
constexpr uint32_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = uint64_t{1} << 36;  // far above an optimizer's state; a guard against garbage
// How many refused connections the server names in the log; later ones are only counted.
constexpr int64_t kRefusalsLogged = 5;

enum Op : uint8_t { kSet = 1, kGet, kAdd, kCheck, kDelete, kCount, kCompareSet };
enum Status : uint8_t { kOk = 0, kMissing = 1, kInvalid = 2 };

Bytes random_bytes(size_t count) {
  Bytes bytes(count);
  if (RAND_bytes(bytes.data(), static_cast<int>(count)) != 1) {
    throw std::runtime_error("rendezvous: OpenSSL's random generator failed");
  }
  return bytes;
}

// HMAC(secret, label first second): what one side sends to show that it knows the secret.
Bytes proof(const std::string& secret, std::string_view label, const uint8_t* first, const uint8_t* second) {
  Bytes message(label.begin(), label.end());
  message.insert(message.end(), first, first + kNonce);
  message.insert(message.end(), second, second + kNonce);
  Bytes digest(EVP_MAX_MD_SIZE);
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(), message.size(), digest.data(),
           &length) == nullptr ||
      length != kProof) {
    throw std::runtime_error("rendezvous: OpenSSL's HMAC-SHA-256 failed");
  }
  digest.resize(kProof);
  return digest;
}

bool same_proof(const Bytes& expected, const uint8_t* received) {
  return CRYPTO_memcmp(expected.data(), received, kProof) == 0;
}

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

}  // namespace

std::string random_secret() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string secret;
  for (uint8_t byte : random_bytes(32)) secret += {kHex[byte >> 4], kHex[byte & 15]};
  return secret;
}

// ---- The server ----

class RendezvousServer::Server {
 public:
  Server(const std::string& host, int port, std::string secret, RendezvousLimits limits)
      : secret_(std::move(secret)), limits_(limits) {
    const std::string address = host + ":" + std::to_string(port);
    try {
      tcp::resolver resolver(io_);
      const tcp::endpoint endpoint = resolver.resolve(host, std::to_string(port))->endpoint();
      acceptor_.open(endpoint.protocol());
      acceptor_.set_option(net::socket_base::reuse_address(true));
      acceptor_.bind(endpoint);
      acceptor_.listen();
    } catch (const std::exception& error) {
      throw std::runtime_error("cannot listen on " + address + ": " + error.what());
    }
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }

  ~Server() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return acceptor_.local_endpoint().port(); }
  int64_t refused() const { return refused_; }

  void refuse(const std::string& from, const std::string& why) {
    const int64_t count = ++refused_;
    if (count <= kRefusalsLogged) {
      spdlog::warn("rendezvous: closed a connection from {}: {}{}", from, why,
                   count == kRefusalsLogged ? " (further refusals are not logged)" : "");
    }
  }

  const std::string& secret() const { return secret_; }
  const RendezvousLimits& limits() const { return limits_; }
  std::map<std::string, Bytes>& data() { return data_; }

 private:
  class Session;
  void accept();

  const std::string secret_;
  const RendezvousLimits limits_;
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
    net::async_read(socket_, net::buffer(hello_), [self = shared_from_this()](error_code error, size_t) {
      error ? self->refuse("it left during the handshake") : self->greet();
    });
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

  // The client's hello read: the server's nonce and proof back.
  void greet() {
    if (!std::equal(kMagic.begin(), kMagic.end(), hello_.begin())) {
      refuse("its first message is not an nmt rendezvous handshake");
      return;
    }
    const Bytes nonce = random_bytes(kNonce);
    std::copy(nonce.begin(), nonce.end(), server_nonce_.begin());
    const Bytes server_proof = proof(server_.secret(), "server", hello_.data() + kMagic.size(), nonce.data());
    std::copy(server_proof.begin(), server_proof.end(), reply_.begin());
    std::copy(nonce.begin(), nonce.end(), reply_.begin() + kProof);
    net::async_write(socket_, net::buffer(reply_), [self = shared_from_this()](error_code error, size_t) {
      if (error) return self->refuse("it left during the handshake");
      net::async_read(self->socket_, net::buffer(self->client_proof_), [self](error_code error, size_t) {
        error ? self->refuse("it left during the handshake") : self->check_proof();
      });
    });
  }

  void check_proof() {
    const Bytes expected = proof(server_.secret(), "client", server_nonce_.data(), hello_.data() + kMagic.size());
    if (!same_proof(expected, client_proof_.data())) {
      refuse("it did not prove the run's secret");
      return;
    }
    authenticated_ = true;
    deadline_.cancel();
    answer_.assign(1, 1);
    write_answer();
  }

  void read_request() {
    net::async_read(socket_, net::buffer(head_), [self = shared_from_this()](error_code error, size_t) {
      if (error) return;
      const uint64_t key_length = read_number(self->head_.data() + 1, 4);
      const uint64_t first_length = read_number(self->head_.data() + 5, 8);
      const uint64_t second_length = read_number(self->head_.data() + 13, 8);
      if (self->head_[0] < kSet || self->head_[0] > kCompareSet || key_length > kMaxKey || first_length > kMaxValue ||
          second_length > kMaxValue) {
        self->close();  // a proven client that sends this is broken: nothing it sends now can be trusted
        return;
      }
      self->key_.resize(key_length);
      self->first_.resize(first_length);
      self->second_.resize(second_length);
      const std::array<net::mutable_buffer, 3> parts = {net::buffer(self->key_), net::buffer(self->first_),
                                                        net::buffer(self->second_)};
      net::async_read(self->socket_, parts, [self](error_code error, size_t) {
        if (error) return;
        self->answer();
        self->write_answer();
      });
    });
  }

  void write_answer() {
    net::async_write(socket_, net::buffer(answer_), [self = shared_from_this()](error_code error, size_t) {
      if (!error) self->read_request();
    });
  }

  void reply(uint8_t status, const Bytes& payload = {}) {
    answer_.assign(kAnswerHead, 0);
    answer_[0] = status;
    put_number(answer_.data() + 1, payload.size(), 8);
    answer_.insert(answer_.end(), payload.begin(), payload.end());
  }

  // The request read: its answer in answer_.
  void answer() {
    std::map<std::string, Bytes>& data = server_.data();
    const std::string key(key_.begin(), key_.end());
    const auto found = data.find(key);
    switch (head_[0]) {
      case kSet:
        data[key] = std::move(first_);
        reply(kOk);
        return;
      case kGet:
        found == data.end() ? reply(kMissing) : reply(kOk, found->second);
        return;
      case kAdd: {
        // A counter is kept as decimal text, as c10d's TCPStore keeps it.
        int64_t value = 0;
        if (first_.size() != 8) return reply(kInvalid);
        if (found != data.end()) {
          const auto* text = reinterpret_cast<const char*>(found->second.data());
          const auto end = text + found->second.size();
          if (std::from_chars(text, end, value).ptr != end) return reply(kInvalid);
        }
        value += static_cast<int64_t>(read_number(first_.data(), 8));
        const std::string text = std::to_string(value);
        data[key] = Bytes(text.begin(), text.end());
        reply(kOk, number_bytes(value));
        return;
      }
      case kCheck:
        reply(kOk, Bytes{found != data.end()});
        return;
      case kDelete:
        reply(kOk, Bytes{static_cast<uint8_t>(data.erase(key))});
        return;
      case kCount:
        reply(kOk, number_bytes(static_cast<int64_t>(data.size())));
        return;
      case kCompareSet:
        // As c10d's stores: the desired value is set when the current one is the expected one (a
        // missing key counts as an empty value); the answer is the value the key now holds.
        if ((found == data.end() && first_.empty()) || (found != data.end() && found->second == first_)) {
          data[key] = second_;
          reply(kOk, second_);
        } else {
          reply(kOk, found == data.end() ? first_ : found->second);
        }
        return;
    }
  }

  tcp::socket socket_;
  net::steady_timer deadline_;
  Server& server_;
  const std::string from_;
  bool authenticated_ = false;
  std::array<uint8_t, kMagic.size() + kNonce> hello_{};
  std::array<uint8_t, kNonce> server_nonce_{};
  std::array<uint8_t, kProof + kNonce> reply_{};
  std::array<uint8_t, kProof> client_proof_{};
  std::array<uint8_t, kRequestHead> head_{};
  Bytes key_, first_, second_, answer_;
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
  Connection(const std::string& host, int port, const std::string& secret, Clock::time_point deadline)
      : address_(host + ":" + std::to_string(port)) {
    std::string last_error = "nothing listens there";
    while (true) {
      try {
        connect(host, port, deadline);
        handshake(secret, deadline);
        return;
      } catch (const RendezvousRefused&) {
        throw;
      } catch (const std::exception& error) {
        last_error = error.what();
      }
      if (Clock::now() + std::chrono::milliseconds(100) >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("cannot reach the rendezvous at " + address_ + " (" + last_error + ")");
  }

  const std::string& address() const { return address_; }

  void write(const std::vector<net::const_buffer>& buffers, Clock::duration timeout) {
    run([&](auto done) { net::async_write(socket_, buffers, done); }, timeout);
  }

  void read(net::mutable_buffer buffer, Clock::duration timeout) {
    run([&](auto done) { net::async_read(socket_, buffer, done); }, timeout);
  }

 private:
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
        deadline - Clock::now());
  }

  void handshake(const std::string& secret, Clock::time_point deadline) {
    std::array<uint8_t, kMagic.size() + kNonce> hello{};
    const Bytes nonce = random_bytes(kNonce);
    std::copy(kMagic.begin(), kMagic.end(), hello.begin());
    std::copy(nonce.begin(), nonce.end(), hello.begin() + kMagic.size());
    write({net::buffer(hello)}, deadline - Clock::now());
    std::array<uint8_t, kProof + kNonce> reply{};
    read(net::buffer(reply), deadline - Clock::now());  // a server evicting us under a flood: try again
    if (!same_proof(proof(secret, "server", nonce.data(), reply.data() + kProof), reply.data())) {
      throw RendezvousRefused("the rendezvous at " + address_ +
                              " did not prove the run's secret: rank 0 has another NMT_RENDEZVOUS_SECRET "
                              "(or --rendezvous-secret-file), or another program listens there");
    }
    const Bytes answer = proof(secret, "client", reply.data() + kProof, nonce.data());
    write({net::buffer(answer)}, deadline - Clock::now());
    uint8_t accepted = 0;
    try {
      read(net::buffer(&accepted, 1), deadline - Clock::now());
    } catch (const std::exception&) {
      throw RendezvousRefused("rank 0 at " + address_ +
                              " refused this rank's proof of the run's secret: give every rank the same "
                              "NMT_RENDEZVOUS_SECRET (or --rendezvous-secret-file)");
    }
  }

  template <typename Start>
  void run(Start start, Clock::duration timeout) {
    if (broken_) throw std::runtime_error("the connection to the rendezvous at " + address_ + " broke earlier");
    error_code result = net::error::would_block;
    start([&result](error_code error, size_t) { result = error; });
    io_.restart();
    io_.run_for(std::max<Clock::duration>(timeout, std::chrono::milliseconds(1)));
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
};

RendezvousStore::RendezvousStore(const std::string& host, int port, const std::string& secret,
                                 std::chrono::milliseconds timeout)
    : c10d::Store(timeout), host_(host), secret_(secret), port_(port) {
  connection_ = std::make_unique<Connection>(host, port, secret, Clock::now() + timeout);
}

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
  Connection& connection = *connection_;
  const auto timeout = std::max<Clock::duration>(timeout_, std::chrono::seconds(1));
  connection.write({net::buffer(head), net::buffer(key), net::buffer(first), net::buffer(second)}, timeout);
  std::array<uint8_t, kAnswerHead> answer{};
  connection.read(net::buffer(answer), timeout);
  const uint64_t length = read_number(answer.data() + 1, 8);
  if (answer[0] > kInvalid || length > kMaxValue) {
    throw std::runtime_error("the rendezvous at " + connection.address() + " sent a malformed answer");
  }
  Bytes payload(length);
  connection.read(net::buffer(payload), timeout);
  status = static_cast<Status>(answer[0]);
  return payload;
}

std::vector<uint8_t> RendezvousStore::request_ok(uint8_t op, const std::string& key, const Bytes& first,
                                                 const Bytes& second) {
  Status status = Status::ok;
  Bytes payload = request(op, key, first, second, status);
  if (status != Status::ok) {
    throw std::runtime_error("the rendezvous at " + connection_->address() + " refused an operation on key " + key +
                             " (a counter that holds something else than a number)");
  }
  return payload;
}

void RendezvousStore::set(const std::string& key, const std::vector<uint8_t>& value) { request_ok(kSet, key, value); }

std::vector<uint8_t> RendezvousStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                                 const std::vector<uint8_t>& desired) {
  return request_ok(kCompareSet, key, expected, desired);
}

std::vector<uint8_t> RendezvousStore::get(const std::string& key) {
  wait({key});
  Status status = Status::ok;
  Bytes value = request(kGet, key, {}, {}, status);
  if (status != Status::ok) throw std::runtime_error("the rendezvous lost key " + key + " while it was read");
  return value;
}

int64_t RendezvousStore::add(const std::string& key, int64_t value) {
  const Bytes payload = request_ok(kAdd, key, number_bytes(value));
  if (payload.size() != 8)
    throw std::runtime_error("the rendezvous at " + connection_->address() + " sent a malformed count");
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
  if (payload.size() != 8)
    throw std::runtime_error("the rendezvous at " + connection_->address() + " sent a malformed count");
  return static_cast<int64_t>(read_number(payload.data(), 8));
}

void RendezvousStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void RendezvousStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto start = Clock::now();
  auto pause = std::chrono::milliseconds(1);
  while (!check(keys)) {
    if (timeout != kNoTimeout && Clock::now() - start >= timeout) {
      std::string names;
      for (const std::string& key : keys) names += (names.empty() ? "" : ", ") + key;
      throw std::runtime_error("the rendezvous at " + connection_->address() + " had no value for " + names +
                               " within " + std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

c10::intrusive_ptr<c10d::Store> RendezvousStore::clone() {
  return c10::make_intrusive<RendezvousStore>(host_, port_, secret_, timeout_);
}

}  // namespace nmt
