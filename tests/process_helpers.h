// Child processes that run while a test talks to them: nmt serve on a free port, nmt translate
// fed through a pipe line by line.
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli_helpers.h"
#include "util/io.h"

namespace nmt::testing {

// A port nothing listens on (the kernel's choice), or, with `keep`, one this test holds open.
inline int loopback_port(int* keep = nullptr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  if (keep != nullptr) {
    REQUIRE(::listen(fd, 4) == 0);
    *keep = fd;
  } else {
    ::close(fd);
  }
  return ntohs(address.sin_port);
}

// A connection to 127.0.0.1:port that has sent `bytes` (-1 if it could not connect).
inline int open_connection(int port, const std::string& bytes) {
  const int socket = ::socket(AF_INET, SOCK_STREAM, 0);
  if (socket < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(socket, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::send(socket, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    ::close(socket);
    return -1;
  }
  return socket;
}

// What the server sends on `socket` until it closes the connection; `closed` says whether it did
// within `seconds`.
inline std::string read_until_closed(int socket, double seconds, bool& closed) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string text;
  char buffer[4096];
  closed = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd ready{socket, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) <= 0) return text;
    const ssize_t count = ::recv(socket, buffer, sizeof(buffer), 0);
    if (count <= 0) {  // closed, or reset
      closed = true;
      return text;
    }
    text.append(buffer, static_cast<size_t>(count));
  }
}

// Whether the other end has closed (or reset) `socket`, reading and dropping what it sent before;
// it does not wait.
inline bool closed_by_peer(int socket) {
  char buffer[4096];
  for (;;) {
    const ssize_t count = ::recv(socket, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (count > 0) continue;
    if (count == 0) return true;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

// Whether the server at the other end of every loopback connection in `sockets` (in any process
// of this machine) has read all that was sent on it: in /proc/net/tcp, nothing this end sent waits
// to be acknowledged (tx_queue) and nothing waits unread in the server's socket (rx_queue). A
// connection the server has closed counts as read. What the tests wait for where the server must
// have taken in a request, or part of one, before the next step.
inline bool server_has_read(const std::vector<int>& sockets) {
  std::ifstream table("/proc/net/tcp");
  if (!table) return false;
  // (local port, remote port) -> (tx_queue, rx_queue), as the kernel lists them in hexadecimal.
  std::map<std::pair<unsigned long, unsigned long>, std::pair<unsigned long, unsigned long>> queues;
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, tx_rx;
    if (!(fields >> slot >> local >> remote >> state >> tx_rx)) continue;
    const size_t local_colon = local.find(':'), remote_colon = remote.find(':'), queue_colon = tx_rx.find(':');
    if (local_colon == std::string::npos || remote_colon == std::string::npos || queue_colon == std::string::npos) {
      continue;
    }
    const unsigned long local_port = std::stoul(local.substr(local_colon + 1), nullptr, 16);
    const unsigned long remote_port = std::stoul(remote.substr(remote_colon + 1), nullptr, 16);
    queues[{local_port, remote_port}] = {std::stoul(tx_rx.substr(0, queue_colon), nullptr, 16),
                                         std::stoul(tx_rx.substr(queue_colon + 1), nullptr, 16)};
  }
  for (const int socket : sockets) {
    sockaddr_in here{}, there{};
    socklen_t here_length = sizeof(here), there_length = sizeof(there);
    if (::getsockname(socket, reinterpret_cast<sockaddr*>(&here), &here_length) != 0) return false;
    if (::getpeername(socket, reinterpret_cast<sockaddr*>(&there), &there_length) != 0) continue;  // closed
    const unsigned long client = ntohs(here.sin_port), server = ntohs(there.sin_port);
    const auto mine = queues.find({client, server}), theirs = queues.find({server, client});
    if (mine != queues.end() && mine->second.first != 0) return false;       // not yet acknowledged
    if (theirs != queues.end() && theirs->second.second != 0) return false;  // not yet read
  }
  return true;
}

// The status of an answer's first line ("HTTP/1.1 413 ..." gives 413), or 0.
inline int status_of(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 && answer.size() >= 12 ? std::atoi(answer.substr(9, 3).c_str()) : 0;
}

// A running child: its pid, and the test's ends of its standard input and output when piped.
struct Child {
  pid_t pid = -1;
  int input = -1;   // write here: the child's standard input
  int output = -1;  // read here: the child's standard output
};

// Starts NMT_BINARY with `arguments`; its standard error goes to `log_path`. Without pipes the
// child's standard input is /dev/null and its standard output goes to the log as well.
inline Child spawn_nmt(const std::vector<std::string>& arguments, const std::string& log_path, bool pipes) {
  int to_child[2] = {-1, -1};
  int from_child[2] = {-1, -1};
  if (pipes) REQUIRE((::pipe(to_child) == 0 && ::pipe(from_child) == 0));
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(log >= 0);
  std::vector<std::string> words = {NMT_BINARY};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  Child child;
  child.pid = ::fork();
  REQUIRE(child.pid >= 0);
  if (child.pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(pipes ? to_child[0] : null, STDIN_FILENO);
    ::dup2(pipes ? from_child[1] : log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    if (pipes) {
      ::close(to_child[1]);
      ::close(from_child[0]);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log);
  if (pipes) {
    ::close(to_child[0]);
    ::close(from_child[1]);
    child.input = to_child[1];
    child.output = from_child[0];
  }
  return child;
}

// The child's exit status, waiting at most `seconds` (-1 if it did not exit in time; it is then
// killed).
inline int wait_for_exit(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Reads from `fd` until `lines` newlines have arrived or `seconds` have passed.
inline std::string read_lines_from(int fd, size_t lines, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string text;
  char buffer[4096];
  while (static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) < lines) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t count = ::read(fd, buffer, sizeof(buffer));
    if (count <= 0) break;
    text.append(buffer, static_cast<size_t>(count));
  }
  return text;
}

// `nmt serve ARGUMENTS --port 0` until the test ends: port is the one it chose.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> arguments, const std::string& name = "serve") {
    log_path_ = (work_directory() / (name + ".log")).string();
    arguments.insert(arguments.begin(), "serve");
    if (std::find(arguments.begin(), arguments.end(), "--port") == arguments.end()) {
      arguments.insert(arguments.end(), {"--port", "0"});
    }
    pid_ = spawn_nmt(arguments, log_path_, false).pid;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const std::string marker = "listening on http://127.0.0.1:";
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = log();
      if (const size_t at = text.find(marker); at != std::string::npos) {
        port = std::stoi(text.substr(at + marker.size()));
        return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pid_ = -1;
        return;  // exited without listening: port stays 0, exit_status() and log() say why
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL("nmt serve did not start within 60 s:\n" << log());
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  std::string log() const { return fs::exists(log_path_) ? read_file(log_path_) : ""; }
  pid_t pid() const { return pid_; }
  // Sends `signal` and waits for the exit status (-1: not within `seconds`).
  int stop(int signal = SIGTERM, double seconds = 30) {
    ::kill(pid_, signal);
    return wait(seconds);
  }
  // Waits for the exit status (-1: not within `seconds`).
  int wait(double seconds) {
    exit_status_ = wait_for_exit(pid_, seconds);
    pid_ = -1;
    return exit_status_;
  }
  int exit_status() const { return exit_status_; }

  int port = 0;

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

}  // namespace nmt::testing
