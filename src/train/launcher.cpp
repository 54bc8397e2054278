#include "train/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "train/rendezvous_store.h"

namespace nmt {
namespace {

// The workers' process ids, for the signal handler (which may only make async-signal-safe calls).
constexpr int kMaxWorkers = 1024;
pid_t g_workers[kMaxWorkers];
volatile sig_atomic_t g_worker_count = 0;
volatile sig_atomic_t g_interrupted = 0;

void forward_signal(int signal) {
  g_interrupted = signal;
  for (int i = 0; i < g_worker_count; ++i) {
    if (g_workers[i] > 0) kill(g_workers[i], signal);
  }
}

// A port no one listens on now (the kernel's choice), for the workers' rendezvous.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("--nproc: cannot open a socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    throw std::runtime_error(std::string("--nproc: cannot find a free port: ") + std::strerror(errno) +
                             "; pass --master-port");
  }
  close(fd);
  return ntohs(address.sin_port);
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

bool failed(int status) { return WIFSIGNALED(status) || WEXITSTATUS(status) != 0; }

}  // namespace

std::vector<std::string> without_nproc(const std::vector<std::string>& arguments) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i] == "--nproc") {
      ++i;  // its value
    } else if (arguments[i].rfind("--nproc=", 0) != 0) {
      kept.push_back(arguments[i]);
    }
  }
  return kept;
}

int launch_workers(const std::string& program, const std::vector<std::string>& arguments, int nproc,
                   const std::string& master_addr, int master_port) {
  if (nproc > kMaxWorkers) throw std::invalid_argument("--nproc: at most " + std::to_string(kMaxWorkers));
  for (const char* variable : {"RANK", "WORLD_SIZE"}) {
    if (const char* value = std::getenv(variable); value != nullptr && *value != '\0') {
      throw std::invalid_argument(std::string("--nproc starts its own ranks, but ") + variable + "=" + value +
                                  " is set (by a launcher?): unset it, or leave out --nproc");
    }
  }
  const std::string address = master_addr.empty() ? "127.0.0.1" : master_addr;
  const int port = master_port > 0 ? master_port : free_port();
  std::cerr << "nmt train: starting " << nproc << " ranks (master " << address << ":" << port << ")" << std::endl;
  // The secret the ranks prove to each other (rendezvous_store.h): the user's, else a new one that
  // only these processes (and the user's own, through /proc) see.
  const char* given = std::getenv("NMT_RENDEZVOUS_SECRET");
  const std::string secret = given != nullptr && *given != '\0' ? given : random_secret();

  struct sigaction action {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  for (int rank = 0; rank < nproc; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      forward_signal(SIGTERM);
      throw std::runtime_error(std::string("--nproc: cannot start a process: ") + std::strerror(errno));
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", address.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("NMT_RENDEZVOUS_SECRET", secret.c_str(), 1);
      execv("/proc/self/exe", argv.data());
      std::cerr << "nmt train: cannot run " << program << ": " << std::strerror(errno) << std::endl;
      _exit(127);
    }
    g_workers[rank] = pid;
    g_worker_count = rank + 1;
  }

  // Wait for every rank; after the first failure, stop the rest.
  int running = nproc, result = 0;
  std::chrono::steady_clock::time_point stop_sent;
  bool stopping = false;
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pid == 0) {  // stopping, none ended yet: SIGKILL what outlives the grace period
      if (std::chrono::steady_clock::now() - stop_sent > std::chrono::seconds(10)) {
        for (int i = 0; i < nproc; ++i) {
          if (g_workers[i] > 0) kill(g_workers[i], SIGKILL);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    int rank = 0;
    while (rank < nproc && g_workers[rank] != pid) ++rank;
    if (rank == nproc) continue;
    g_workers[rank] = 0;
    --running;
    if (!failed(status) || stopping) continue;
    stopping = true;
    stop_sent = std::chrono::steady_clock::now();
    if (g_interrupted != 0) {
      result = 128 + g_interrupted;
      continue;
    }
    result = 1;
    std::cerr << "nmt train: rank " << rank << " " << describe(status)
              << (running > 0 ? "; stopping the other ranks" : "") << std::endl;
    for (int i = 0; i < nproc; ++i) {
      if (g_workers[i] > 0) kill(g_workers[i], SIGTERM);
    }
  }
  g_worker_count = 0;
  if (g_interrupted != 0) {
    std::cerr << "nmt train: interrupted (" << strsignal(g_interrupted)
              << "); every rank stopped; the checkpoints written are complete: --resume continues" << std::endl;
    return 128 + g_interrupted;
  }
  return result;
}

}  // namespace nmt
