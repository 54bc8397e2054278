#include "serve/connections.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "serve/request.h"

namespace nmt::serve {

using Clock = std::chrono::steady_clock;

// An accepted connection, and the bytes read from it that httplib has not read yet.
struct Connection {
  socket_t socket = INVALID_SOCKET;
  std::string received;
  size_t scanned = 0;          // bytes of `received` already searched for the end of the headers
  size_t requests = 0;         // answered on this connection so far
  size_t head_end = 0;         // once its headers are in: bytes of `received` up to the blank line
  bool started = false;        // a byte of the next request has arrived
  Clock::time_point deadline;  // it is closed then unless the request's headers are in
};

namespace {

constexpr size_t kMaxHeadBytes = 64 * 1024;  // a longer request line and headers get 431
constexpr size_t kReadChunk = 4096;          // bytes asked of each recv(), as httplib's own stream

void hang_up(const Connection& connection) {
  ::shutdown(connection.socket, SHUT_RDWR);
  ::close(connection.socket);
}

// Answers a waiting connection with an error and closes it. Its send buffer is empty: a few
// hundred bytes go out without waiting.
void send_error_and_close(const Connection& connection, int status, const char* reason, const std::string& message) {
  const std::string body = error_json(message);
  const std::string answer = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                             "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n\r\n" + body;
  [[maybe_unused]] ssize_t sent = ::send(connection.socket, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  hang_up(connection);
}

enum class Arrival { kWaiting, kHead, kTooLong, kClosed };

// Reads what `connection` has sent, without blocking, until its request line and headers are in.
Arrival read_head(Connection& connection) {
  char buffer[kReadChunk];
  for (;;) {
    const size_t from = connection.scanned > 3 ? connection.scanned - 3 : 0;
    if (const size_t blank = connection.received.find("\r\n\r\n", from); blank != std::string::npos) {
      connection.head_end = blank + 4;
      return Arrival::kHead;
    }
    connection.scanned = connection.received.size();
    if (connection.received.size() > kMaxHeadBytes) return Arrival::kTooLong;
    const ssize_t count = ::recv(connection.socket, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (count > 0) {
      connection.received.append(buffer, static_cast<size_t>(count));
    } else if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return Arrival::kWaiting;
    } else if (count == 0 || errno != EINTR) {
      return Arrival::kClosed;  // by the client, or reset
    }
  }
}

// Waits at most `timeout_ms` for `events` on `socket`.
bool wait_for(socket_t socket, short events, int timeout_ms) {
  pollfd ready{socket, events, 0};
  int count = 0;
  do {
    count = ::poll(&ready, 1, timeout_ms);
  } while (count < 0 && errno == EINTR);
  return count > 0;
}

// httplib's view of a connection while a thread answers its request: first the bytes that the
// poll loop read, then the socket, each wait bounded by the read or the write timeout.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(Connection& connection, const ConnectionOptions& options)
      : connection_(connection), options_(options) {}

  bool is_readable() const override {
    return offset_ < connection_.received.size() || wait_for(connection_.socket, POLLIN, options_.read_timeout_ms);
  }
  bool is_writable() const override { return wait_for(connection_.socket, POLLOUT, options_.write_timeout_ms); }

  ssize_t read(char* data, size_t size) override {
    std::string& received = connection_.received;
    if (offset_ == received.size()) {
      if (!wait_for(connection_.socket, POLLIN, options_.read_timeout_ms)) return -1;
      received.resize(kReadChunk);
      ssize_t count = 0;
      do {
        count = ::recv(connection_.socket, received.data(), received.size(), 0);
      } while (count < 0 && errno == EINTR);
      received.resize(count > 0 ? static_cast<size_t>(count) : 0);
      offset_ = 0;
      if (count <= 0) return count;
    }
    const size_t count = std::min(size, received.size() - offset_);
    std::memcpy(data, received.data() + offset_, count);
    offset_ += count;
    consumed_ += count;
    return static_cast<ssize_t>(count);
  }

  ssize_t write(const char* data, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t count = 0;
    do {
      count = ::send(connection_.socket, data, size, MSG_NOSIGNAL);
    } while (count < 0 && errno == EINTR);
    return count;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
  socket_t socket() const override { return connection_.socket; }

  // Whether httplib read the request's headers to their end. It answers a bad request line with
  // 400 without reading them, and answering the rest as requests would answer what was never asked.
  bool read_whole_head() const { return consumed_ >= connection_.head_end; }

  // Drops what httplib has read, keeping what came after it (the start of the next request).
  void keep_unread() {
    connection_.received.erase(0, offset_);
    offset_ = 0;
  }

 private:
  void address(bool peer, std::string& ip, int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    auto* generic = reinterpret_cast<sockaddr*>(&address);
    char host[NI_MAXHOST] = "";
    char service[NI_MAXSERV] = "";
    const int found = peer ? ::getpeername(connection_.socket, generic, &length)
                           : ::getsockname(connection_.socket, generic, &length);
    if (found == 0 && ::getnameinfo(generic, length, host, sizeof(host), service, sizeof(service),
                                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(service);
    }
  }

  Connection& connection_;
  const ConnectionOptions& options_;
  size_t offset_ = 0;    // into connection_.received: what httplib has read
  size_t consumed_ = 0;  // bytes httplib has read in all
};

}  // namespace

// What httplib's accept loop hands each connection to (Server::new_task_queue): a poll() loop in
// which connections wait for their request line and headers, and `threads` threads that answer
// the requests whose headers are in.
class ConnectionQueue final : public httplib::TaskQueue {
 public:
  // Reads one request from the stream and answers it (Server::process_request); `last`: say
  // "Connection: close". Sets `closed` when the client asked for that.
  using Answer = std::function<bool(httplib::Stream& stream, bool last, bool& closed)>;

  ConnectionQueue(ConnectionOptions options, Answer answer);
  ~ConnectionQueue() override;
  ConnectionQueue(const ConnectionQueue&) = delete;
  ConnectionQueue& operator=(const ConnectionQueue&) = delete;

  // The accept loop passes [this, sock] { process_and_close_socket(sock); }, which parks the
  // connection (HttpServer): run here at once, it holds no thread.
  void enqueue(std::function<void()> task) override { task(); }
  // After the accept loop has ended: answers the requests whose headers are in, closes the rest.
  void shutdown() override;
  // A connection just accepted, or one whose request was answered and that stays open.
  void park(Connection connection);

 private:
  void wait_for_heads();
  void answer_requests();
  // Reads what arrived on a waiting connection: true while it still waits; otherwise it went to
  // the threads or was closed.
  bool look(Connection& connection, Clock::time_point now);
  void expire(const Connection& connection);
  void wake();

  ConnectionOptions options_;
  Answer answer_;
  int wake_ = -1;  // an eventfd: park() and shutdown() wake the poll loop through it
  std::mutex mutex_;
  std::condition_variable ready_to_answer_;
  std::vector<Connection> arrived_;  // parked since the poll loop last looked
  std::deque<Connection> ready_;     // headers in: for the threads
  bool stopping_ = false;            // the accept loop has ended: nothing waits any more
  bool finished_ = false;            // the poll loop has ended: the threads leave when ready_ is empty
  std::thread poll_loop_;
  std::vector<std::thread> threads_;
};

ConnectionQueue::ConnectionQueue(ConnectionOptions options, Answer answer)
    : options_(std::move(options)), answer_(std::move(answer)), wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  poll_loop_ = std::thread([this] { wait_for_heads(); });
  for (size_t i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { answer_requests(); });
}

ConnectionQueue::~ConnectionQueue() {
  shutdown();
  ::close(wake_);
}

void ConnectionQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake();
  if (poll_loop_.joinable()) poll_loop_.join();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void ConnectionQueue::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_, &one, sizeof(one));
}

void ConnectionQueue::park(Connection connection) {
  bool parked = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      arrived_.push_back(std::move(connection));
      parked = true;
    }
  }
  if (parked) {
    wake();
  } else {
    hang_up(connection);
  }
}

bool ConnectionQueue::look(Connection& connection, Clock::time_point now) {
  switch (read_head(connection)) {
    case Arrival::kWaiting:
      if (!connection.started && !connection.received.empty()) {
        connection.started = true;
        connection.deadline = now + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.header_timeout_seconds));
      }
      return true;
    case Arrival::kHead: {
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.push_back(std::move(connection));
      ready_to_answer_.notify_one();
      return false;
    }
    case Arrival::kTooLong:
      send_error_and_close(connection, 431, "Request Header Fields Too Large",
                           "the request line and headers are over " + std::to_string(kMaxHeadBytes) + " bytes");
      if (options_.on_refused) options_.on_refused();
      return false;
    case Arrival::kClosed:
      hang_up(connection);
      return false;
  }
  return false;
}

void ConnectionQueue::expire(const Connection& connection) {
  if (!connection.started) {  // idle: closed without a word, as httplib closes an idle kept-alive one
    hang_up(connection);
    return;
  }
  send_error_and_close(
      connection, 408, "Request Timeout",
      fmt::format("the request line and headers did not arrive within {:g} s (nmt serve --header-timeout)",
                  options_.header_timeout_seconds));
  if (options_.on_refused) options_.on_refused();
}

void ConnectionQueue::wait_for_heads() {
  std::vector<Connection> waiting;  // the longest-waiting first
  std::vector<pollfd> polled;
  for (;;) {
    std::vector<Connection> arrived;
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      arrived.swap(arrived_);
      stopping = stopping_;
    }
    // A new connection, or a kept-alive one (perhaps holding the start of its next request).
    Clock::time_point now = Clock::now();
    for (Connection& connection : arrived) {
      connection.started = false;
      connection.scanned = 0;
      connection.deadline = now + options_.idle_timeout;
      if (look(connection, now)) waiting.push_back(std::move(connection));
    }
    if (stopping) break;
    if (waiting.size() > options_.max_waiting) {
      const auto excess = static_cast<std::ptrdiff_t>(waiting.size() - options_.max_waiting);
      std::for_each(waiting.begin(), waiting.begin() + excess, hang_up);
      waiting.erase(waiting.begin(), waiting.begin() + excess);
    }

    polled.assign(1, pollfd{wake_, POLLIN, 0});
    Clock::time_point next_deadline = Clock::time_point::max();
    for (const Connection& connection : waiting) {
      polled.push_back(pollfd{connection.socket, POLLIN, 0});
      next_deadline = std::min(next_deadline, connection.deadline);
    }
    int timeout_ms = -1;
    if (!waiting.empty()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60 * 1000));
    }
    if (::poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR) {
      spdlog::error("poll: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (polled[0].revents != 0) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t read = ::read(wake_, &count, sizeof(count));
    }

    now = Clock::now();
    size_t kept = 0;
    for (size_t i = 0; i < waiting.size(); ++i) {
      Connection& connection = waiting[i];
      bool still_waiting = polled[i + 1].revents == 0 || look(connection, now);
      if (still_waiting && connection.deadline <= now) {
        expire(connection);
        still_waiting = false;
      }
      if (still_waiting) {
        if (kept != i) waiting[kept] = std::move(connection);
        ++kept;
      }
    }
    waiting.resize(kept);
  }
  // Stopping: a request whose headers are here is still answered; the other connections close.
  for (Connection& connection : waiting) {
    if (look(connection, Clock::now())) hang_up(connection);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  ready_to_answer_.notify_all();
}

void ConnectionQueue::answer_requests() {
  for (;;) {
    Connection connection;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_to_answer_.wait(lock, [this] { return !ready_.empty() || finished_; });
      if (ready_.empty()) return;
      connection = std::move(ready_.front());
      ready_.pop_front();
      stopping = stopping_;
    }
    ConnectionStream stream(connection, options_);
    const bool last = ++connection.requests >= options_.max_requests || stopping;
    bool closed = false;
    const bool answered = answer_(stream, last, closed);
    stream.keep_unread();
    if (answered && !closed && !last && stream.read_whole_head()) {
      park(std::move(connection));
    } else {
      hang_up(connection);
    }
  }
}

HttpServer::HttpServer(ConnectionOptions options) : options_(std::move(options)) {
  // Called by listen_after_bind, after configure(): the timeouts are httplib's settings.
  new_task_queue = [this] {
    ConnectionOptions options = options_;
    options.idle_timeout = std::chrono::seconds(keep_alive_timeout_sec_);
    options.max_requests = keep_alive_max_count_;
    options.read_timeout_ms = static_cast<int>(read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000);
    options.write_timeout_ms = static_cast<int>(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
    queue_ = new ConnectionQueue(options, [this](httplib::Stream& stream, bool last, bool& closed) {
      return process_request(stream, last, closed, nullptr);
    });
    return queue_;
  };
}

bool HttpServer::process_and_close_socket(socket_t socket) {
  Connection connection;
  connection.socket = socket;
  queue_->park(std::move(connection));
  return true;
}

size_t waiting_connections_that_fit(size_t wanted, size_t answering) {
  constexpr rlim_t kReserve = 64;  // the model's files, the log, the listening socket, pipes
  const rlim_t needed = wanted + static_cast<rlim_t>(answering) + kReserve;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return wanted;
  if (limit.rlim_cur < needed) {
    rlimit raised = limit;
    // Room beyond `needed` too: connections whose headers are in queue for a thread without a cap.
    raised.rlim_cur = std::min(std::max<rlim_t>(needed, 65536), limit.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur >= needed) return wanted;
  const rlim_t others = static_cast<rlim_t>(answering) + kReserve;
  const size_t fits = limit.rlim_cur > others + 1 ? static_cast<size_t>(limit.rlim_cur - others) : 1;
  spdlog::warn(
      "only {} file descriptors (ulimit -n): {} connections wait for their headers at most, not "
      "--max-waiting-connections {}",
      limit.rlim_cur, fits, wanted);
  return fits;
}
}  // namespace nmt::serve
