// nmt serve's connections on Boost.Beast (serve/http_server.h). Each connection is a Session that
// goes through its phases on its own strand:
//   idle    waiting for the first byte of a request (idle_seconds; closed without a word)
//   head    the request line and headers, read a step at a time into a buffer held in the memory
//           budget (header_seconds from the first byte: 408; 431 past max_head_bytes or
//           max_header_fields); then the checks that need no body (framing, encoding, route)
//   body    the body, its bytes taken from the memory budget as they arrive (request_seconds from
//           the first byte: 408; 413 past max_body_bytes)
//   handle  the routes make the answer, on a worker when there is a body (no thread held while a
//           translation runs); counted in max_answering
//   write   the answer, its bytes in the memory budget, under the minimum send rate
//   linger  after a refusal or "Connection: close": what the client still sends is read and
//           dropped for a moment (a lingering close, as nginx's), so that the client reads the
//           answer rather than a reset
// Every phase but handle is in the waiting list, which max_waiting caps and make_room searches.
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
#include <functional>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
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
constexpr double kSendGraceSeconds = 2;      // an answer's time beside its size at the minimum rate
constexpr size_t kLingerBytes = 256 * 1024;  // dropped at most after a refusal
constexpr size_t kReadStep = 16 * 1024;      // bytes asked of the socket at a time
constexpr size_t kSmallBody = 64 * 1024;     // larger bodies are handled on a worker of their own
constexpr size_t kForwardedBytes = 256;      // of X-Forwarded-For, kept for the access log
// A phase younger than this is not judged by its progress: a connection that has just begun to
// read has read nothing yet.
constexpr double kProgressGraceSeconds = 1;

std::string_view view(beast::string_view text) { return {text.data(), text.size()}; }

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(value));
}

HttpAnswer error_answer(int status, const std::string& message) {
  return {status, "application/json", error_body(message)};
}

// The status line and the headers, as they go on the wire before the body. (The routes' content
// types are constants; a line break in one would still not reach the wire.)
std::string answer_head(const HttpAnswer& answer, bool keep_alive) {
  std::string type = answer.content_type;
  type.erase(std::remove_if(type.begin(), type.end(), [](char c) { return c == '\r' || c == '\n'; }), type.end());
  const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(answer.status));
  std::string text = fmt::format("HTTP/1.1 {} {}\r\nServer: nmt\r\n", answer.status, view(reason));
  // A 204 has no body, and says nothing of one (RFC 9110, 8.6).
  if (answer.status != 204) text += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n", type, answer.body.size());
  if (answer.status == 503) text += "Retry-After: 1\r\n";
  const auto one_line = [](std::string value) {
    value.erase(std::remove_if(value.begin(), value.end(), [](char c) { return c == '\r' || c == '\n'; }), value.end());
    return value;
  };
  for (const auto& [name, value] : answer.headers) text += one_line(name) + ": " + one_line(value) + "\r\n";
  if (!keep_alive) text += "Connection: close\r\n";
  text += "\r\n";
  return text;
}

// A request as Beast's parser reads it, keeping only the headers the server uses: a flood of
// other fields costs the bytes it is sent in and no more, and past `max_fields` it is refused. The
// body's bytes are appended once `grow` has found room for them in the memory budget.
class RequestParser : public http::basic_parser<true> {
 public:
  RequestParser(size_t max_fields, size_t max_body_bytes, std::function<bool(size_t)> grow)
      : max_fields_(max_fields), max_body_bytes_(max_body_bytes), grow_(std::move(grow)) {}

  HttpRequest request;            // its body empty: see `body`
  std::string content_encoding;   // the first that is not "identity", or ""
  std::string transfer_encoding;  // the first that is not "chunked", or ""
  std::string expect;
  std::string forwarded_for;  // the first X-Forwarded-For header's value, cut at kForwardedBytes
  std::string body;
  bool too_many_fields = false;
  bool out_of_memory = false;  // `grow` found no room
  bool repeated_host = false;

 private:
  void on_request_impl(http::verb, beast::string_view method, beast::string_view target, int, error_code&) override {
    request.method = std::string(method);
    request.path = std::string(target.substr(0, target.find('?')));
  }

  void on_response_impl(int, beast::string_view, int, error_code& error) override {
    error = http::error::bad_version;  // a request parser is never given an answer
  }

  void on_field_impl(http::field name, beast::string_view name_text, beast::string_view value,
                     error_code& error) override {
    if (is_header_done()) return;  // a chunked body's trailers: read past, never kept
    if (++fields_ > max_fields_) {
      too_many_fields = true;
      error = http::error::header_limit;
      return;
    }
    switch (name) {
      case http::field::host:
        if (hosts_++ > 0) {
          repeated_host = true;
          error = http::error::bad_field;
        }
        request.host = std::string(value);
        break;
      case http::field::content_type:
        if (request.content_type.empty()) request.content_type = std::string(value);
        break;
      case http::field::content_encoding:
        if (content_encoding.empty() && header_token(view(value)) != "identity") content_encoding = std::string(value);
        break;
      case http::field::transfer_encoding:
        if (transfer_encoding.empty() && header_token(view(value)) != "chunked") transfer_encoding = std::string(value);
        break;
      case http::field::expect:
        expect = std::string(value);
        break;
      case http::field::authorization:
        if (request.authorization.empty()) request.authorization = std::string(value);
        break;
      case http::field::origin:
        if (request.origin.empty()) request.origin = std::string(value);
        break;
      default:
        if (forwarded_for.empty() && beast::iequals(name_text, "x-forwarded-for")) {
          forwarded_for = std::string(value.substr(0, kForwardedBytes));
        }
        break;
    }
  }

  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  size_t on_body_impl(beast::string_view data, error_code& error) override { return append(data, error); }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, beast::string_view data, error_code& error) override {
    return append(data, error);
  }
  void on_finish_impl(error_code&) override {}

  size_t append(beast::string_view data, error_code& error) {
    const size_t needed = body.size() + data.size();
    if (needed > body.capacity()) {
      const size_t capacity = std::max(needed, std::min(2 * body.capacity(), max_body_bytes_));
      if (!grow_(capacity)) {
        out_of_memory = true;
        error = http::error::buffer_overflow;
        return 0;
      }
      // A new string of exactly that capacity (reserve() on this one could double it).
      std::string grown;
      grown.reserve(capacity);
      grown.append(body);
      body.swap(grown);
    }
    body.append(data.data(), data.size());
    return data.size();
  }

  size_t max_fields_;
  size_t max_body_bytes_;
  std::function<bool(size_t)> grow_;
  size_t fields_ = 0;
  size_t hosts_ = 0;
};

}  // namespace

class Session;

// What every session shares: the limits, the routes, the counts, the memory budget and the list of
// the sessions that can be closed to make room.
struct Shared {
  HttpLimits limits;
  HttpRoutes routes;
  // Handling requests with a body: those of up to kSmallBody bytes, and larger ones apart, so that
  // a small request never waits behind a megabyte being parsed.
  net::thread_pool* workers = nullptr;
  net::thread_pool* large_workers = nullptr;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> answering{0};  // requests being handled, until their answer is built
  std::atomic<size_t> memory{0};     // held by sessions, all of them
  std::mutex waiting_mutex;
  std::list<std::weak_ptr<Session>> waiting;  // every session not being handled, the longest-waiting first

  // Takes `bytes` of the memory budget; false (nothing taken) when they do not fit.
  bool take_memory(size_t bytes) {
    size_t held = memory.load();
    do {
      if (held + bytes > limits.max_memory) return false;
    } while (!memory.compare_exchange_weak(held, held + bytes));
    return true;
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared& shared)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buffer_(shared.limits.max_head_bytes),  // full before the headers end: 431
        shared_(shared) {
    error_code error;
    const tcp::endpoint peer = socket_.remote_endpoint(error);
    if (!error) client_ = peer.address().to_string();
  }
  ~Session() {
    if (counted_) shared_.answering.fetch_sub(1);  // an answer that never came
    shared_.memory.fetch_sub(held_.exchange(0));
  }

  void start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->wait_for_request(); });
  }

  // From any thread: closes the connection if it is waiting for a request or its headers (stop()),
  // or whatever it waits for (`always`: it waited longest of too many, or made the least progress).
  void close_from_outside(bool always) {
    net::post(socket_.get_executor(), [self = shared_from_this(), always] {
      const Phase phase = self->phase_;
      if (always ? phase != Phase::kHandle : phase == Phase::kIdle || phase == Phase::kHead) self->close();
    });
  }

 private:
  enum class Phase { kIdle, kHead, kBody, kHandle, kWrite, kLinger, kClosed };

  // --- idle: the first byte of the next request -------------------------------------------------
  void wait_for_request() {
    if (shared_.stopping) return close();
    phase_ = Phase::kIdle;
    start_waiting();
    start_phase();
    parser_.emplace(shared_.limits.max_header_fields, shared_.limits.max_body_bytes,
                    [this](size_t capacity) { return hold(buffer_.capacity() + capacity); });
    parser_->header_limit(static_cast<std::uint32_t>(shared_.limits.max_head_bytes));
    parser_->body_limit(shared_.limits.max_body_bytes);
    if (buffer_.size() > 0) return start_request();  // it came with the previous request
    arm(seconds(shared_.limits.idle_seconds));
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code error) {
      self->disarm();
      if (error || self->phase_ == Phase::kClosed) return self->close();
      self->start_request();
    });
  }

  // --- head and body: read a step, hand it to the parser, until the request is whole ----------
  void start_request() {
    phase_ = Phase::kHead;
    start_phase();
    const Clock::time_point now = Clock::now();
    request_start_ = now;
    exchange_ = HttpExchange{};
    exchange_.client = client_;
    request_deadline_ = now + seconds(shared_.limits.request_seconds);
    head_deadline_ = std::min(request_deadline_, now + seconds(shared_.limits.header_seconds));
    if (buffer_.size() > 0) return parse();
    read_more();
  }

  void read_more() {
    const size_t room = std::min(kReadStep, buffer_.max_size() - buffer_.size());
    if (room == 0) return phase_ == Phase::kHead ? refuse_head_size() : refuse_long_line();
    const net::mutable_buffer space = buffer_.prepare(room);
    if (!hold(buffer_.capacity() + parser_->body.capacity()))
      return evicted_ ? close() : refuse_busy("requests being read");
    arm((phase_ == Phase::kHead ? head_deadline_ : request_deadline_) - Clock::now());
    socket_.async_read_some(
        space, [self = shared_from_this()](error_code error, size_t count) { self->on_read(error, count); });
  }

  void on_read(error_code error, size_t count) {
    const bool late = disarm();
    if (phase_ == Phase::kClosed) return;
    if (evicted_) return close();  // make_room took its memory; its close is on the way
    if (error) {
      if (late) return phase_ == Phase::kHead ? refuse_late_head() : refuse_late_body();
      return close();  // the client closed or reset it, or the socket failed
    }
    buffer_.commit(count);
    progress_ += count;
    parse();
  }

  void parse() {
    while (buffer_.size() > 0 && !parser_->is_done()) {
      error_code error;
      const size_t used = parser_->put(buffer_.data(), error);
      buffer_.consume(used);
      if (error == http::error::need_more) break;
      if (error) return refuse_parse(error);
      if (phase_ == Phase::kHead && parser_->is_header_done() && !on_head()) return;
      if (used == 0) break;
    }
    if (parser_->is_done()) return handle();
    read_more();
  }

  // The checks that need no body; false when the request was refused or a 100 Continue is being
  // written (which reads on when it is).
  bool on_head() {
    phase_ = Phase::kBody;
    buffer_.shrink_to_fit();  // what the headers took goes back to the budget at the next read
    if (!parser_->content_encoding.empty()) {
      refuse(415, "Content-Encoding " + printable(parser_->content_encoding) +
                      ": compressed bodies are not accepted; send the JSON as it is");
      return false;
    }
    if (!parser_->transfer_encoding.empty()) {
      refuse(415, "Transfer-Encoding " + printable(parser_->transfer_encoding) +
                      ": only chunked is accepted (compressed bodies are not)");
      return false;
    }
    if (shared_.routes.refuse) {
      if (std::optional<HttpAnswer> refusal = shared_.routes.refuse(parser_->request)) {
        refuse(std::move(*refusal));
        return false;
      }
    }
    if (!beast::iequals(parser_->expect, "100-continue") || parser_->is_done()) return true;
    continue_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    arm(request_deadline_ - Clock::now());
    net::async_write(socket_, net::buffer(*continue_), [self = shared_from_this()](error_code error, size_t) {
      const bool late = self->disarm();
      if (self->phase_ == Phase::kClosed) return;
      if (error) return late ? self->refuse_late_body() : self->close();
      self->parse();
    });
    return false;
  }

  // --- handle: the routes make the answer (no thread held while a translation runs) -------------
  void handle() {
    stop_waiting();  // from here make_room cannot choose it
    if (evicted_) return close();
    if (shared_.answering.fetch_add(1) >= shared_.limits.max_answering) {
      shared_.answering.fetch_sub(1);
      return refuse_busy("requests being answered (nmt serve --connections)");
    }
    counted_ = true;
    // While the answer is made elsewhere, nothing of this session is pending in Asio: this keeps
    // run() from returning before it is written.
    work_ = net::prefer(socket_.get_executor(), net::execution::outstanding_work.tracked);
    phase_ = Phase::kHandle;
    ++requests_;
    keep_alive_ = parser_->keep_alive() && requests_ < shared_.limits.max_requests && !shared_.stopping;
    note_request();
    HttpRequest request = std::move(parser_->request);
    request.body = std::move(parser_->body);  // its memory stays held until the answer is written
    parser_.reset();
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
    if (request.body.empty()) return run_route(shared_.routes, std::move(request), respond);
    net::thread_pool& pool = request.body.size() <= kSmallBody ? *shared_.workers : *shared_.large_workers;
    net::post(pool, [self = shared_from_this(), request = std::move(request), respond]() mutable {
      run_route(self->shared_.routes, std::move(request), respond);
      // The body is gone with the request: its share of the budget goes back now, not when the
      // translation is done (unless the answer, written meanwhile, has settled it already).
      Session& session = *self;
      net::post(session.socket_.get_executor(), [self = std::move(self)] {
        if (self->phase_ == Phase::kHandle) self->hold(self->buffer_.capacity());
      });
    });
  }

  static void run_route(const HttpRoutes& routes, HttpRequest request, const Respond& respond) {
    const std::string what = request.method + " " + request.path;
    try {
      routes.answer(std::move(request), respond);
    } catch (const std::exception& exception) {
      spdlog::error("{} failed: {}", what, exception.what());
      respond(error_answer(500, exception.what()));
    }
  }

  // --- write: the answer, under a minimum send rate, its bytes in the memory budget ------------
  void write(HttpAnswer answer, bool refusal) {
    if (phase_ == Phase::kClosed) {  // the client went while its request was handled
      exchange_.status = answer.status;
      exchange_.log_fields = std::move(answer.log_fields);
      reporting_ = true;
      report(false, 0);
      return finish();
    }
    finish();  // the answer is built: its request's place among those handled goes
    if (refusal || shared_.stopping) keep_alive_ = false;
    head_ = answer_head(answer, keep_alive_);
    exchange_.status = answer.status;
    exchange_.log_fields = std::move(answer.log_fields);
    reporting_ = true;
    // A refusal is small, and written whatever the budget says.
    if (!hold(buffer_.capacity() + head_.size() + answer.body.size()) && !refusal) {
      if (evicted_) return close();
      spdlog::debug("503: no memory left for an answer of {} bytes", answer.body.size());
      keep_alive_ = false;
      refusal = true;
      answer = error_answer(503, "the server is busy (too many answers being written): try again in a moment");
      head_ = answer_head(answer, keep_alive_);
      exchange_.status = 503;
    }
    body_ = std::move(answer.body);
    phase_ = Phase::kWrite;
    start_waiting();
    start_phase();
    const double limit =
        refusal ? kRefusalSeconds
                : std::min(shared_.limits.answer_seconds,
                           kSendGraceSeconds + static_cast<double>(answer_bytes()) / shared_.limits.min_send_rate);
    arm(seconds(limit));
    write_more(refusal);
  }

  size_t answer_bytes() const { return head_.size() + body_.size(); }

  void write_more(bool refusal) {
    const size_t sent = progress_;
    const size_t in_body = sent > head_.size() ? sent - head_.size() : 0;
    const std::array<net::const_buffer, 2> rest{net::buffer(head_) + std::min(sent, head_.size()),
                                                net::buffer(body_) + in_body};
    socket_.async_write_some(rest, [self = shared_from_this(), refusal](error_code error, size_t count) {
      self->progress_ += count;
      if (error || self->phase_ == Phase::kClosed) {
        self->disarm();
        return self->close();
      }
      if (self->progress_ < self->answer_bytes()) return self->write_more(refusal);
      self->disarm();
      self->written(refusal);
    });
  }

  void written(bool refusal) {
    report(true, progress_);
    head_ = std::string();
    body_ = std::string();
    buffer_.shrink_to_fit();
    hold(buffer_.capacity());
    if (refusal || !keep_alive_) return linger();
    wait_for_request();
  }

  // The request has its answer (or none will be written): its place among those handled goes.
  void finish() {
    if (counted_) shared_.answering.fetch_sub(1);
    counted_ = false;
    work_ = {};
  }

  // --- refusals ---------------------------------------------------------------------------------
  void refuse(int status, const std::string& message) { refuse(error_answer(status, message)); }

  void refuse(HttpAnswer answer) {
    note_request();
    parser_.reset();  // a refused body's bytes go now, not after the lingering close
    if (shared_.routes.refused) shared_.routes.refused();
    write(std::move(answer), /*refusal=*/true);
  }

  void refuse_parse(const error_code& error) {
    if (parser_->out_of_memory) return evicted_ ? close() : refuse_busy("requests being read");
    if (parser_->too_many_fields) {
      return refuse(431, "the request has over " + std::to_string(shared_.limits.max_header_fields) + " header fields");
    }
    if (parser_->repeated_host) return refuse(400, "the request has more than one Host header");
    if (error == http::error::header_limit) return phase_ == Phase::kHead ? refuse_head_size() : refuse_long_line();
    if (error == http::error::body_limit) return refuse_body_size();
    refuse(400, std::string(phase_ == Phase::kHead ? "malformed HTTP request (" : "malformed HTTP body (") +
                    error.message() + ")");
  }

  void refuse_head_size() {
    refuse(431, "the request line and headers are over " + std::to_string(shared_.limits.max_head_bytes) + " bytes");
  }

  // A chunk's size line, its extensions or the trailers, past max_head_bytes.
  void refuse_long_line() {
    refuse(400, "malformed HTTP body (a chunk line or trailers over " + std::to_string(shared_.limits.max_head_bytes) +
                    " bytes)");
  }

  void refuse_body_size() {
    refuse(413, "the body is over the limit of " + std::to_string(shared_.limits.max_body_bytes) +
                    " bytes (nmt serve --max-body-bytes)");
  }

  void refuse_late_head() {
    refuse(408, "the request line and headers did not arrive within " + number(shared_.limits.header_seconds) +
                    " s (nmt serve --header-timeout)");
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
  // has read the answer. It stays among the waiting sessions, whose cap counts its descriptor.
  void linger() {
    phase_ = Phase::kLinger;
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
    if (phase_ == Phase::kWrite) report(false, progress_);  // the answer was cut off
    phase_ = Phase::kClosed;
    stop_waiting();
    finish();
    parser_.reset();
    shared_.memory.fetch_sub(held_.exchange(0));
    timer_.cancel();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    // Only now: until the socket is closed, another thread may still be sending from them.
    head_ = std::string();
    body_ = std::string();
  }

  // --- the exchange: what routes.done is told ----------------------------------------------------
  // What the request said of itself, while its parser still holds it.
  void note_request() {
    if (!parser_) return;
    exchange_.method = parser_->request.method;
    exchange_.path = parser_->request.path;
    exchange_.request_bytes = parser_->body.size();
    exchange_.forwarded_for = parser_->forwarded_for;
  }

  // Once per answer: written whole, or cut off after `bytes`.
  void report(bool answered, size_t bytes) {
    if (!std::exchange(reporting_, false) || !shared_.routes.done) return;
    exchange_.answered = answered;
    exchange_.answer_bytes = bytes;
    exchange_.seconds = std::chrono::duration<double>(Clock::now() - request_start_).count();
    try {
      shared_.routes.done(exchange_);
    } catch (const std::exception& exception) {
      spdlog::warn("after {} {}: {}", printable(exchange_.method), printable(exchange_.path), exception.what());
    }
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

  // --- the waiting list and the memory budget ---------------------------------------------------
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
          // Whatever it does next (its close is posted behind it), it closes: a session that
          // moved on to be handled or written must not be left half-closed by the stale close.
          oldest->evicted_ = true;
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

  // A new phase: its progress counts from now.
  void start_phase() {
    progress_ = 0;
    phase_start_ = Clock::now();
  }

  double phase_seconds(Clock::time_point now) const {
    return std::chrono::duration<double>(now - phase_start_.load()).count();
  }

  // Bytes a second moved in this phase (read for a request, written for an answer).
  double progress_rate(Clock::time_point now) const {
    return static_cast<double>(progress_.load()) / std::max(phase_seconds(now), 1e-3);
  }

  // Makes this session hold `total` bytes of the memory budget: gives back what it holds beyond,
  // or takes what it lacks, closing the sessions that have made the least progress when that does
  // not fit. False when it still does not (or this session was closed to make room).
  bool hold(size_t total) {
    if (evicted_) return false;
    size_t held = held_.load();
    while (total <= held) {
      if (held_.compare_exchange_weak(held, total)) {
        shared_.memory.fetch_sub(held - total);
        return true;
      }
    }
    const size_t more = total - held;
    if (!shared_.take_memory(more) && !(make_room(more) && shared_.take_memory(more))) return false;
    held_ += more;
    return true;
  }

  bool make_room(size_t bytes) {
    std::vector<std::shared_ptr<Session>> evicted;
    {
      std::lock_guard<std::mutex> lock(shared_.waiting_mutex);
      const Clock::time_point now = Clock::now();
      while (shared_.memory.load() + bytes > shared_.limits.max_memory) {
        // The slowest that holds any memory, of those whose phase has lasted kProgressGraceSeconds
        // when there are any; of equals, the one that has waited longest.
        auto slowest = shared_.waiting.end();
        std::shared_ptr<Session> slowest_session;
        bool slowest_judged = false;
        double slowest_rate = 0;
        for (auto entry = shared_.waiting.begin(); entry != shared_.waiting.end(); ++entry) {
          std::shared_ptr<Session> session = entry->lock();
          if (!session || session.get() == this || session->held_.load() == 0) continue;
          const bool judged = session->phase_seconds(now) >= kProgressGraceSeconds;
          const double rate = session->progress_rate(now);
          if (slowest == shared_.waiting.end() || (judged && !slowest_judged) ||
              (judged == slowest_judged && rate < slowest_rate)) {
            slowest = entry;
            slowest_session = session;
            slowest_judged = judged;
            slowest_rate = rate;
          }
        }
        if (slowest == shared_.waiting.end()) break;
        std::shared_ptr<Session> session = std::move(slowest_session);
        // Its memory is given back here, at once; its buffers go when it closes, on its own strand.
        session->evicted_ = true;
        session->waiting_ = false;
        shared_.memory.fetch_sub(session->held_.exchange(0));
        shared_.waiting.erase(slowest);
        evicted.push_back(std::move(session));
      }
    }
    for (auto& session : evicted) session->close_from_outside(true);
    return !evicted.empty();
  }

  static std::string number(double value) { return fmt::format("{:g}", value); }

  tcp::socket socket_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;  // bytes read and not yet parsed
  Shared& shared_;
  std::optional<RequestParser> parser_;
  std::string head_;           // the answer being written: its status line and headers
  std::string body_;           // and its body
  net::any_io_executor work_;  // tracks outstanding work while the routes make the answer
  std::shared_ptr<std::string> continue_;
  std::array<char, 16384> drop_buffer_{};
  Phase phase_ = Phase::kIdle;
  Clock::time_point head_deadline_;
  Clock::time_point request_deadline_;
  Clock::time_point request_start_;  // the first byte of the request being read or answered
  std::string client_;               // the peer's address
  HttpExchange exchange_;            // the request being read or answered
  bool reporting_ = false;           // its answer is being written: report() when done
  unsigned generation_ = 0;
  bool late_ = false;
  bool keep_alive_ = false;
  bool counted_ = false;  // in shared_.answering
  size_t requests_ = 0;   // answered on this connection
  size_t dropped_ = 0;    // bytes dropped while lingering
  // Read by make_room from other threads.
  std::atomic<size_t> held_{0};       // bytes of shared_.memory it holds (make_room takes them)
  std::atomic<bool> evicted_{false};  // make_room closed it to give its memory to another
  std::atomic<size_t> progress_{0};   // bytes read or written in this phase
  std::atomic<Clock::time_point> phase_start_{Clock::now()};
  // In shared_.waiting (under its mutex).
  bool waiting_ = false;
  std::list<std::weak_ptr<Session>>::iterator waiting_entry_;
};

struct HttpServer::Impl {
  explicit Impl(HttpLimits limits, HttpRoutes routes)
      : acceptor(net::make_strand(context)),
        pause(acceptor.get_executor()),
        workers(std::max<size_t>(limits.threads, 1)),
        large_workers(1) {
    shared.limits = limits;
    shared.routes = std::move(routes);
    shared.workers = &workers;
    shared.large_workers = &large_workers;
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
  // Destroyed first (joined): a request a worker still handles posts its answer to `context`.
  net::thread_pool workers;
  net::thread_pool large_workers;
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

size_t HttpServer::answering() const { return impl_->shared.answering.load(); }

bool HttpServer::stopping() const { return impl_->shared.stopping.load(); }

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
