// nmt serve's connections on Boost.Beast (serve/http_server.h). Each connection is a Session that
// goes through its phases on its own strand:
//   idle    waiting for the first byte of a request (idle_seconds; closed without a word)
//   head    the request line and headers (header_seconds from the first byte: 408; 431 past
//           max_head_bytes); then the checks that need no body (framing, encoding, size, route)
//   body    the body, a read at a time, each read's bytes taken from the shared body budget
//           (request_seconds from the first byte: 408; 413 past max_body_bytes)
//   answer  handled by the routes (no thread held while a translation runs), then written
//           (answer_seconds for the whole answer)
// A refusal is written with "Connection: close"; the connection then reads and drops what the
// client still sends for a moment (a lingering close, as nginx's), so that the client reads the
// answer rather than a reset.
#include "serve/http_server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace nmt::serve {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;

std::string printable(std::string_view text, size_t limit) {
  std::string shown;
  for (char c : text.substr(0, limit)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  return text.size() > limit ? shown + "..." : shown;
}

std::string header_token(std::string_view value) {
  std::string token(value.substr(0, value.find(';')));
  token.erase(0, token.find_first_not_of(" \t"));
  token.erase(token.find_last_not_of(" \t") + 1);
  std::transform(token.begin(), token.end(), token.begin(), [](unsigned char c) { return std::tolower(c); });
  return token;
}

std::string error_body(const std::string& message) {
  return nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

constexpr double kRefusalSeconds = 2;        // to write a refusal and drop what follows it
constexpr size_t kLingerBytes = 256 * 1024;  // dropped at most after a refusal
constexpr size_t kBodyStep = 64 * 1024;      // a chunked body's budget is taken in these steps

std::string_view view(beast::string_view text) { return {text.data(), text.size()}; }

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(value));
}

HttpAnswer error_answer(int status, const std::string& message) {
  return {status, "application/json", error_body(message)};
}

}  // namespace

class Session;

// What every session shares: the limits, the routes, the counts and the list of waiting sessions.
struct Shared {
  HttpLimits limits;
  HttpRoutes routes;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> answering{0};   // requests past their body, until their answer is written
  std::atomic<size_t> body_bytes{0};  // held by bodies, all sessions
  std::atomic<size_t> lingering{0};   // refused connections draining what their clients still send
  std::mutex waiting_mutex;
  std::list<std::weak_ptr<Session>> waiting;  // the longest-waiting first

  // Takes `bytes` of the body budget; false (nothing taken) when they do not fit.
  bool take_body_bytes(size_t bytes) {
    size_t held = body_bytes.load();
    do {
      if (held + bytes > limits.max_body_memory) return false;
    } while (!body_bytes.compare_exchange_weak(held, held + bytes));
    return true;
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared& shared)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buffer_(shared.limits.max_head_bytes),  // full before the headers end: 431
        shared_(shared) {}
  ~Session() {
    if (counted_) shared_.answering.fetch_sub(1);  // an answer that never came
    if (lingering_) shared_.lingering.fetch_sub(1);
    give_back_body_bytes();
  }

  void start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->wait_for_request(); });
  }

  // From any thread: closes the connection if it is waiting for a request or its headers (stop()),
  // or whatever it waits for (`always`: it waited longest of too many).
  void close_from_outside(bool always) {
    net::post(socket_.get_executor(), [self = shared_from_this(), always] {
      if (always ? self->phase_ != Phase::kAnswer : self->phase_ == Phase::kIdle || self->phase_ == Phase::kHead) {
        self->close();
      }
    });
  }

 private:
  enum class Phase { kIdle, kHead, kBody, kAnswer, kClosed };

  // --- idle: the first byte of the next request -------------------------------------------------
  void wait_for_request() {
    if (shared_.stopping) return close();
    phase_ = Phase::kIdle;
    start_waiting();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shared_.limits.max_head_bytes));
    parser_->body_limit(shared_.limits.max_body_bytes);
    if (buffer_.size() > 0) return read_head();  // it came with the previous request
    arm(seconds(shared_.limits.idle_seconds));
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code error) {
      self->disarm();
      if (error || self->phase_ == Phase::kClosed) return self->close();
      self->read_head();
    });
  }

  // --- head -------------------------------------------------------------------------------------
  void read_head() {
    phase_ = Phase::kHead;
    request_deadline_ = Clock::now() + seconds(shared_.limits.request_seconds);
    arm(std::min(seconds(shared_.limits.header_seconds), seconds(shared_.limits.request_seconds)));
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](error_code error, size_t) { self->on_head(error); });
  }

  void on_head(error_code error) {
    const bool late = disarm();
    if (phase_ == Phase::kClosed) return;
    if (error) {
      if (late) {
        return refuse(408, "the request line and headers did not arrive within " +
                               number(shared_.limits.header_seconds) + " s (nmt serve --header-timeout)");
      }
      if (error == http::error::header_limit || error == http::error::buffer_overflow) {
        return refuse(
            431, "the request line and headers are over " + std::to_string(shared_.limits.max_head_bytes) + " bytes");
      }
      if (error == http::error::body_limit) return refuse_body_size();
      if (closed_by_client(error)) return close();
      return refuse(400, "malformed HTTP request (" + error.message() + ")");
    }
    const auto& head = parser_->get();
    if (const auto encoding = head.find(http::field::content_encoding); encoding != head.end()) {
      if (header_token(view(encoding->value())) != "identity") {
        return refuse(415, "Content-Encoding " + printable(view(encoding->value())) +
                               ": compressed bodies are not accepted; send the JSON as it is");
      }
    }
    if (const auto transfer = head.find(http::field::transfer_encoding); transfer != head.end()) {
      if (header_token(view(transfer->value())) != "chunked") {
        return refuse(415, "Transfer-Encoding " + printable(view(transfer->value())) +
                               ": only chunked is accepted (compressed bodies are not)");
      }
    }
    request_.method = std::string(head.method_string());
    const beast::string_view target = head.target();
    request_.path = std::string(target.substr(0, target.find('?')));
    request_.content_type = std::string(head[http::field::content_type]);
    request_.host = std::string(head[http::field::host]);
    request_.body.clear();
    if (shared_.routes.refuse) {
      if (std::optional<HttpAnswer> refusal = shared_.routes.refuse(request_)) return refuse(std::move(*refusal));
    }
    // A body of known length takes its bytes of the budget now, before any is read.
    if (const auto length = parser_->content_length(); length && !take(static_cast<size_t>(*length))) {
      return refuse_busy("bodies being read");
    }
    phase_ = Phase::kBody;
    if (beast::iequals(head[http::field::expect], "100-continue") && !parser_->is_done()) {
      continue_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      arm(request_deadline_ - Clock::now());
      return net::async_write(socket_, net::buffer(*continue_), [self = shared_from_this()](error_code error, size_t) {
        const bool late = self->disarm();
        if (self->phase_ == Phase::kClosed) return;
        if (error) return late ? self->refuse_late_body() : self->close();
        self->read_body();
      });
    }
    read_body();
  }

  // --- body -------------------------------------------------------------------------------------
  void read_body() {
    if (parser_->is_done()) return handle();
    arm(request_deadline_ - Clock::now());
    http::async_read_some(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code error, size_t) { self->on_body(error); });
  }

  void on_body(error_code error) {
    const bool late = disarm();
    if (phase_ == Phase::kClosed) return;
    if (evicted_) return close();  // make_room took its budget; its close is on the way
    if (error) {
      if (late) return refuse_late_body();
      if (error == http::error::body_limit) return refuse_body_size();
      if (closed_by_client(error)) return close();
      return refuse(400, "malformed HTTP body (" + error.message() + ")");
    }
    // A chunked body takes its budget as it grows, in steps, counting what its string holds.
    const size_t capacity = parser_->get().body().capacity();
    if (const size_t held = body_held_.load(); capacity > held && !take(std::max(capacity - held, kBodyStep))) {
      return refuse_busy("bodies being read");
    }
    read_body();
  }

  // --- answer -----------------------------------------------------------------------------------
  void handle() {
    if (evicted_) return close();
    stop_waiting();
    if (shared_.answering.fetch_add(1) >= shared_.limits.max_answering) {
      shared_.answering.fetch_sub(1);
      return refuse_busy("requests being answered (nmt serve --connections)");
    }
    counted_ = true;
    // While the answer is made elsewhere, nothing of this session is pending in Asio: this keeps
    // run() from returning before it is written.
    work_ = net::prefer(socket_.get_executor(), net::execution::outstanding_work.tracked);
    phase_ = Phase::kAnswer;
    ++requests_;
    keep_alive_ = parser_->get().keep_alive() && requests_ < shared_.limits.max_requests && !shared_.stopping;
    request_.body = std::move(parser_->get().body());
    // The session, handed over on the first call: the routes' copies of `respond` (a batch queue
    // keeps its own until its loop moves on) then hold no reference that could outlive the server.
    auto holder = std::make_shared<std::shared_ptr<Session>>(shared_from_this());
    auto once = std::make_shared<std::atomic<bool>>(false);
    Respond respond = [holder, once](HttpAnswer answer) {
      if (once->exchange(true)) return;
      // The posted handler takes the connection along: the answering thread keeps no reference.
      std::shared_ptr<Session> self = std::move(*holder);
      Session& session = *self;
      net::post(session.socket_.get_executor(), [self = std::move(self), answer = std::move(answer)]() mutable {
        self->write(std::move(answer), false);
      });
    };
    const std::string what = request_.method + " " + request_.path;
    try {
      shared_.routes.answer(std::move(request_), respond);
    } catch (const std::exception& exception) {
      spdlog::error("{} failed: {}", what, exception.what());
      respond(error_answer(500, exception.what()));
    }
  }

  void write(HttpAnswer answer, bool refusal) {
    if (phase_ == Phase::kClosed) return finish();
    if (refusal || shared_.stopping) keep_alive_ = false;
    answer_ = {static_cast<http::status>(answer.status), 11};
    answer_.set(http::field::server, "nmt");
    answer_.set(http::field::content_type, answer.content_type);
    if (answer.status == 503) answer_.set(http::field::retry_after, "1");
    answer_.body() = std::move(answer.body);
    answer_.keep_alive(keep_alive_);
    answer_.prepare_payload();
    phase_ = Phase::kAnswer;
    arm(seconds(refusal ? kRefusalSeconds : shared_.limits.answer_seconds));
    http::async_write(socket_, answer_, [self = shared_from_this(), refusal](error_code error, size_t) {
      self->disarm();
      self->finish();
      if (error || self->phase_ == Phase::kClosed) return self->close();
      if (refusal || !self->keep_alive_) return self->linger();
      self->answer_ = {};
      self->wait_for_request();
    });
  }

  // The request is answered (or dropped): its place among those answered and its body's budget go.
  void finish() {
    if (counted_) shared_.answering.fetch_sub(1);
    counted_ = false;
    work_ = {};
    give_back_body_bytes();
  }

  // --- refusals ---------------------------------------------------------------------------------
  void refuse(int status, const std::string& message) { refuse(error_answer(status, message)); }

  void refuse(HttpAnswer answer) {
    stop_waiting();
    parser_.reset();  // a refused body's bytes go now, not after the lingering close
    request_.body = std::string();
    if (shared_.routes.refused) shared_.routes.refused();
    write(std::move(answer), /*refusal=*/true);
  }

  void refuse_body_size() {
    refuse(413, "the body is over the limit of " + std::to_string(shared_.limits.max_body_bytes) +
                    " bytes (nmt serve --max-body-bytes)");
  }

  void refuse_late_body() {
    refuse(408, "the request did not arrive whole within " + number(shared_.limits.request_seconds) +
                    " s of its first byte (nmt serve --request-timeout)");
  }

  void refuse_busy(const std::string& what) {
    spdlog::debug("503: too many {}", what);
    refuse(503, "the server is busy (too many " + what + "): try again in a moment");
  }

  // After "Connection: close": no more sending, and what the client still sends is read and
  // dropped for a moment, so that its unread bytes do not reset the connection before the client
  // has read the answer.
  void linger() {
    // Lingering connections are capped as waiting ones are: past the cap, closed at once.
    if (shared_.lingering.fetch_add(1) >= shared_.limits.max_waiting) {
      shared_.lingering.fetch_sub(1);
      return close();
    }
    lingering_ = true;
    phase_ = Phase::kAnswer;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(seconds(kRefusalSeconds));
    drop_more();
  }

  void drop_more() {
    socket_.async_read_some(net::buffer(drop_buffer_), [self = shared_from_this()](error_code error, size_t count) {
      self->dropped_ += count;
      if (error || self->dropped_ > kLingerBytes || self->phase_ == Phase::kClosed) {
        self->disarm();
        return self->close();
      }
      self->drop_more();
    });
  }

  void close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    if (std::exchange(lingering_, false)) shared_.lingering.fetch_sub(1);
    stop_waiting();
    finish();
    timer_.cancel();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // --- deadlines --------------------------------------------------------------------------------
  // One deadline at a time: when it passes, the pending operation is cancelled and its handler
  // sees disarm() return true.
  void arm(Clock::duration left) {
    const unsigned generation = ++generation_;
    late_ = false;
    timer_.expires_after(std::max(left, Clock::duration::zero()));
    timer_.async_wait([self = shared_from_this(), generation](error_code error) {
      if (error || generation != self->generation_) return;
      self->late_ = true;
      error_code ignored;
      self->socket_.cancel(ignored);
    });
  }

  bool disarm() {
    ++generation_;
    timer_.cancel();
    return std::exchange(late_, false);
  }

  // --- the shared lists and budget --------------------------------------------------------------
  void start_waiting() {
    std::vector<std::shared_ptr<Session>> evicted;
    {
      std::lock_guard<std::mutex> lock(shared_.waiting_mutex);
      if (waiting_) return;
      waiting_entry_ = shared_.waiting.insert(shared_.waiting.end(), weak_from_this());
      waiting_ = true;
      while (shared_.waiting.size() > shared_.limits.max_waiting) {
        if (auto oldest = shared_.waiting.front().lock()) {
          oldest->waiting_ = false;
          evicted.push_back(std::move(oldest));
        }
        shared_.waiting.pop_front();
      }
    }
    for (auto& session : evicted) session->close_from_outside(true);
  }

  void stop_waiting() {
    std::lock_guard<std::mutex> lock(shared_.waiting_mutex);
    if (!waiting_) return;
    shared_.waiting.erase(waiting_entry_);
    waiting_ = false;
  }

  // Takes `bytes` of the body budget; when they do not fit, the bodies that have waited longest
  // are closed to make room, as connections past --max-waiting-connections are: bodies that
  // trickle cannot hold the budget against requests that come whole.
  bool take(size_t bytes) {
    if (!shared_.take_body_bytes(bytes) && !(make_room(bytes) && shared_.take_body_bytes(bytes))) return false;
    body_held_ += bytes;
    return true;
  }

  bool make_room(size_t bytes) {
    std::vector<std::shared_ptr<Session>> evicted;
    {
      std::lock_guard<std::mutex> lock(shared_.waiting_mutex);
      for (auto entry = shared_.waiting.begin();
           entry != shared_.waiting.end() && shared_.body_bytes.load() + bytes > shared_.limits.max_body_memory;) {
        std::shared_ptr<Session> oldest = entry->lock();
        // Its bytes are given back here, at once; its memory when it closes, on its own strand.
        const size_t held = oldest && oldest.get() != this ? oldest->body_held_.exchange(0) : 0;
        if (held == 0) {
          ++entry;
          continue;
        }
        shared_.body_bytes.fetch_sub(held);
        oldest->evicted_ = true;
        oldest->waiting_ = false;
        entry = shared_.waiting.erase(entry);
        evicted.push_back(std::move(oldest));
      }
    }
    for (auto& session : evicted) session->close_from_outside(true);
    return !evicted.empty();
  }

  void give_back_body_bytes() { shared_.body_bytes.fetch_sub(body_held_.exchange(0)); }

  static bool closed_by_client(const error_code& error) {
    return error == http::error::end_of_stream || error == net::error::eof || error == net::error::operation_aborted ||
           error == net::error::connection_reset || error == http::error::partial_message;
  }

  static std::string number(double value) { return fmt::format("{:g}", value); }

  tcp::socket socket_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  Shared& shared_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> answer_;
  HttpRequest request_;
  net::any_io_executor work_;  // tracks outstanding work while the routes make the answer
  std::shared_ptr<std::string> continue_;
  std::array<char, 16384> drop_buffer_{};
  Phase phase_ = Phase::kIdle;
  Clock::time_point request_deadline_;
  unsigned generation_ = 0;
  bool late_ = false;
  bool keep_alive_ = false;
  bool counted_ = false;              // in shared_.answering
  std::atomic<size_t> body_held_{0};  // bytes of shared_.body_bytes it holds (make_room takes them)
  std::atomic<bool> evicted_{false};  // make_room closed it to give its budget to another body
  bool lingering_ = false;            // counted in shared_.lingering
  size_t requests_ = 0;               // answered on this connection
  size_t dropped_ = 0;                // bytes dropped while lingering
  // In shared_.waiting (under its mutex).
  bool waiting_ = false;
  std::list<std::weak_ptr<Session>>::iterator waiting_entry_;
};

struct HttpServer::Impl {
  explicit Impl(HttpLimits limits, HttpRoutes routes)
      : acceptor(net::make_strand(context)), pause(acceptor.get_executor()) {
    shared.limits = limits;
    shared.routes = std::move(routes);
  }

  void accept() {
    acceptor.async_accept(net::make_strand(context), [this](error_code error, tcp::socket socket) {
      if (shared.stopping || !acceptor.is_open()) return;
      if (error) {
        // Out of descriptors, say: the waiting connections' cap is what keeps this rare.
        spdlog::warn("accept: {}", error.message());
        pause.expires_after(std::chrono::milliseconds(50));
        pause.async_wait([this](error_code) { accept(); });
        return;
      }
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // answers are small: send them now
      std::make_shared<Session>(std::move(socket), shared)->start();
      accept();
    });
  }

  // Declared first, destroyed last: sessions that the context's pending handlers hold end with
  // it, and they use `shared` as they go.
  Shared shared;
  net::io_context context;
  tcp::acceptor acceptor;   // on a strand, with `pause` and stop()'s work
  net::steady_timer pause;  // before accepting again after an error
};

HttpServer::HttpServer(HttpLimits limits, HttpRoutes routes)
    : impl_(std::make_unique<Impl>(limits, std::move(routes))) {}

HttpServer::~HttpServer() = default;

int HttpServer::listen(const std::string& host, int port) {
  const auto refused = [&](const error_code& error) {
    return std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + " (" + error.message() +
                              "): choose another --port or --host");
  };
  error_code error;
  net::ip::address address = net::ip::make_address(host, error);
  if (error) {  // a name (localhost, this machine's): its first address
    tcp::resolver resolver(impl_->context);
    const auto found = resolver.resolve(host, "", tcp::resolver::passive, error);
    if (error || found.empty()) {
      throw std::runtime_error("--host " + host + ": not an address or name of this machine (" +
                               (error ? error.message() : std::string("no address")) +
                               "); give one like 127.0.0.1, 0.0.0.0 or ::1");
    }
    address = found.begin()->endpoint().address();
  }
  tcp::acceptor& acceptor = impl_->acceptor;
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  acceptor.open(endpoint.protocol(), error);
  if (error) throw refused(error);
  // SO_REUSEADDR, not SO_REUSEPORT: a second server on the same port is refused, not given half
  // of the connections.
  acceptor.set_option(net::socket_base::reuse_address(true), error);
  acceptor.bind(endpoint, error);
  if (error) throw refused(error);
  acceptor.listen(net::socket_base::max_listen_connections, error);
  if (error) throw refused(error);
  return acceptor.local_endpoint().port();
}

void HttpServer::run() {
  impl_->accept();
  std::vector<std::thread> threads;
  for (size_t i = 1; i < std::max<size_t>(impl_->shared.limits.threads, 1); ++i) {
    threads.emplace_back([this] { impl_->context.run(); });
  }
  impl_->context.run();
  for (std::thread& thread : threads) thread.join();
}

void HttpServer::stop() {
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    impl->shared.stopping = true;
    error_code ignored;
    impl->acceptor.close(ignored);
    impl->pause.cancel();
    std::vector<std::shared_ptr<Session>> waiting;
    {
      std::lock_guard<std::mutex> lock(impl->shared.waiting_mutex);
      for (const auto& entry : impl->shared.waiting) {
        if (auto session = entry.lock()) waiting.push_back(std::move(session));
      }
    }
    for (auto& session : waiting) session->close_from_outside(false);
  });
}

size_t waiting_connections_that_fit(size_t waiting, size_t answering) {
  constexpr rlim_t kReserve = 64;  // the model's files, the log, the listening socket, pipes
  const rlim_t needed = waiting + static_cast<rlim_t>(answering) + kReserve;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return waiting;
  if (limit.rlim_cur < needed) {
    rlimit raised = limit;
    raised.rlim_cur = std::min(std::max<rlim_t>(needed, 65536), limit.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur >= needed) return waiting;
  const rlim_t others = static_cast<rlim_t>(answering) + kReserve;
  const size_t fits = limit.rlim_cur > others + 1 ? static_cast<size_t>(limit.rlim_cur - others) : 1;
  spdlog::warn("only {} file descriptors (ulimit -n): {} connections wait at most, not --max-waiting-connections {}",
               limit.rlim_cur, fits, waiting);
  return fits;
}

}  // namespace nmt::serve
