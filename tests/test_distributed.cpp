// Training on several ranks (train/distributed.h), on loopback: real processes, the real rendezvous
// store and Gloo. Two ranks must follow one process with the same update batch (--accumulate 2) and stay equal
// to each other; a dead or stopped rank ends the other within the timeout, naming it; a run resumes
// with another number of ranks on the same trajectory.
#include <catch2/catch.hpp>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <filesystem>
#include <thread>

#include "cli_helpers.h"
#include "process_helpers.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/fused_adam.h"
#include "train/optimizer_state.h"
#include "train/replicas.h"

namespace nmt::testing {
namespace {

// The largest absolute difference between two checkpoints' weights.
double weight_difference(const std::string& a, const std::string& b) {
  const TrainingCheckpoint first = load_training_checkpoint(a, torch::kCPU);
  const TrainingCheckpoint second = load_training_checkpoint(b, torch::kCPU);
  const auto second_parameters = second.model.network->named_parameters();
  double difference = 0;
  for (const auto& parameter : first.model.network->named_parameters()) {
    difference =
        std::max(difference, (parameter.value() - second_parameters[parameter.key()]).abs().max().item<double>());
  }
  return difference;
}

std::string dir(const std::string& name) { return (work_directory() / ("dist_" + name)).string(); }

// Tiny runs without dropout: ranks and single processes must then agree up to rounding.
std::string run_arguments(const std::string& model_dir, int steps) {
  return tiny_train_arguments(model_dir, steps, 2) + " --dropout 0";
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in(text);
  for (std::string word; in >> word;) result.push_back(word);
  return result;
}

// Rank `rank` of 2 on `port`, writing its log to model_dir.rank<N>.log.
Child start_rank(const std::string& arguments, int rank, int port) {
  std::vector<std::string> list = words(arguments);
  for (const std::string& option :
       std::vector<std::string>{"--rank", std::to_string(rank), "--world-size", "2", "--master-port",
                                std::to_string(port), "--dist-timeout", "5"}) {
    list.push_back(option);
  }
  return spawn_nmt(list, dir("fault") + ".rank" + std::to_string(rank) + ".log", false);
}

// Waits until `path` exists (at most `seconds`).
bool wait_for_path(const std::string& path, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Rounding may differ between two ranks and --accumulate 2 (the sums are formed in another order);
// on the toy runs with one thread each they agree bit for bit, while one rank's batches alone (no
// all-reduce) move the weights by about 8e-3 within 6 updates.
constexpr double kTolerance = 2e-5;

}  // namespace

TEST_CASE("distributed: two ranks stay equal and follow one process with the same update batch", "[distributed]") {
  const std::string two = dir("two"), one = dir("one"), alone = dir("alone");
  // --nproc: nmt starts and supervises the ranks; --check-replicas 1 compares their weights (bit
  // for bit) after every update and fails the run if they differ.
  const CommandResult ranks = run_nmt(run_arguments(two, 6) + " --nproc 2 --check-replicas 1");
  INFO(ranks.output);
  REQUIRE(ranks.status == 0);
  CHECK(ranks.output.find("distributed: 2 ranks (gloo") != std::string::npos);
  REQUIRE(run_nmt(run_arguments(one, 6) + " --accumulate 2").status == 0);
  REQUIRE(run_nmt(run_arguments(alone, 6)).status == 0);
  const double same_batch = weight_difference(two + "/last.ckpt", one + "/last.ckpt");
  const double half_batch = weight_difference(two + "/last.ckpt", alone + "/last.ckpt");
  INFO("two ranks vs --accumulate 2: " << same_batch << ", vs one rank's batches alone: " << half_batch);
  CHECK(same_batch < kTolerance);
  CHECK(half_batch > 10 * kTolerance);  // the comparison can tell a missing all-reduce
}

TEST_CASE("distributed: under torchrun's agent store, the ranks find rank 0's store through it", "[distributed]") {
  // The agent's store, as torchrun hosts it on MASTER_PORT; it asks for no secret, so rank 0's own
  // store takes another port and names it there.
  int held = -1;
  const int port = loopback_port(&held);
  ::close(held);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  c10d::TCPStore agent("127.0.0.1", options);
  const std::string model_dir = dir("agent");
  const std::string rank = "TORCHELASTIC_USE_AGENT_STORE=True " + std::string(NMT_BINARY) + " " +
                           run_arguments(model_dir, 2) + " --overwrite --world-size 2 --master-port " +
                           std::to_string(port) + " --rank ";
  const CommandResult result = run_shell(rank + "1 >" + model_dir + ".rank1.log 2>&1 & " + rank + "0 >" + model_dir +
                                         ".rank0.log 2>&1; first=$?; wait $!; echo $first $?");
  INFO(read_file(model_dir + ".rank0.log") << read_file(model_dir + ".rank1.log"));
  CHECK(result.output == "0 0\n");
  const std::vector<uint8_t> named = agent.get("nmt/attempt_0/rendezvous_port");
  const int store_port = std::stoi(std::string(named.begin(), named.end()));
  CHECK(store_port != port);
  CHECK(store_port > 0);
}

TEST_CASE("distributed: a rank that dies or stops ends the other within the timeout, naming it",
          "[distributed][slow][kill]") {
  const std::string model_dir = dir("fault");
  const std::string arguments = tiny_train_arguments(model_dir, 100000, 5);
  fs::remove_all(model_dir);
  // The last case first opens a connection to rank 0's store that sends the first byte of a
  // message and no more, as a rank stopped halfway through one, or a stranger, leaves it.
  const auto [victim, survivor, action, stall_store] =
      GENERATE(std::make_tuple(1, 0, SIGKILL, false), std::make_tuple(0, 1, SIGKILL, false),
               std::make_tuple(1, 0, SIGSTOP, false), std::make_tuple(1, 0, SIGSTOP, true));
  INFO("rank " << victim << " gets signal " << action << (stall_store ? ", a connection to the store stalled" : ""));
  const int port = loopback_port();
  Child ranks[2] = {start_rank(arguments, 0, port), start_rank(arguments, 1, port)};
  REQUIRE(wait_for_path(model_dir + "/last.ckpt", 60));  // a validation has written a checkpoint
  const int stalled = stall_store ? open_connection(port, std::string(1, '\0')) : -1;
  const auto start = std::chrono::steady_clock::now();
  ::kill(ranks[victim].pid, action);
  const int status = wait_for_exit(ranks[survivor].pid, 20);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::kill(ranks[victim].pid, SIGKILL);
  wait_for_exit(ranks[victim].pid, 10);
  const std::string log = read_file(dir("fault") + ".rank" + std::to_string(survivor) + ".log");
  INFO(log);
  CHECK(status == 1);
  // --dist-timeout 5, and 3 s of silence to name the rank.
  CHECK(seconds < 5 + 3 + 4);
  if (stall_store) ::close(stalled);
  if (victim == 0) {
    CHECK(log.find("rank 0 (the master at 127.0.0.1:" + std::to_string(port) +
                   ", which holds the rendezvous store) "
                   "is gone") != std::string::npos);
  } else {
    CHECK(log.find("rank 1 stopped answering") != std::string::npos);
  }
  // The checkpoint written before is whole.
  CHECK_NOTHROW(load_training_checkpoint(model_dir + "/last.ckpt", torch::kCPU));
}

TEST_CASE("distributed: a run resumes with another number of ranks on the same trajectory",
          "[distributed][slow][kill]") {
  const std::string straight = dir("straight");
  REQUIRE(run_nmt(run_arguments(straight, 8) + " --accumulate 2 --overwrite").status == 0);
  // Two ranks, then one process (with --accumulate 2 for the same update batch); and the reverse.
  const auto [name, before, after] = GENERATE(std::make_tuple("two_then_one", "--nproc 2", "--accumulate 2"),
                                              std::make_tuple("one_then_two", "--accumulate 2", "--nproc 2"));
  INFO(name);
  const std::string model_dir = dir(name);
  fs::remove_all(model_dir);
  REQUIRE(run_nmt(run_arguments(model_dir, 4) + " " + before).status == 0);
  const CommandResult resumed = run_nmt(run_arguments(model_dir, 8) + " " + after + " --resume");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(weight_difference(model_dir + "/last.ckpt", straight + "/last.ckpt") < kTolerance);
}

TEST_CASE(
    "distributed: a port in use, an absent master, a wrong secret and half a torchrun environment are clear errors",
    "[distributed]") {
  int held = -1;
  const int busy = loopback_port(&held);
  const std::string arguments = tiny_train_arguments(dir("errors"), 2, 2) + " --overwrite --world-size 2";
  const CommandResult in_use = run_nmt(arguments + " --rank 0 --master-port " + std::to_string(busy));
  ::close(held);
  CHECK(in_use.status == 1);
  CHECK(in_use.output.find("rank 0 cannot listen on 127.0.0.1:" + std::to_string(busy)) != std::string::npos);

  const CommandResult absent =
      run_nmt(arguments + " --rank 1 --dist-timeout 1 --master-port " + std::to_string(loopback_port()));
  CHECK(absent.status == 1);
  CHECK(absent.output.find("rank 1 cannot reach the master (rank 0) at 127.0.0.1:") != std::string::npos);

  // A rank without the secret stops at once; one with another secret than rank 0's stops when rank
  // 0's store refuses its proof.
  const CommandResult no_secret = run_nmt(arguments + " --rank 1", "env -u NMT_RENDEZVOUS_SECRET");
  CHECK(no_secret.status == 1);
  CHECK(no_secret.output.find("set NMT_RENDEZVOUS_SECRET to the same value on every rank") != std::string::npos);
  const int port = loopback_port();
  const std::string master_port = " --dist-timeout 10 --master-port " + std::to_string(port);
  const Child master = spawn_nmt(words(arguments + " --rank 0" + master_port), dir("errors") + ".rank0.log", false);
  const CommandResult impostor =
      run_nmt(arguments + " --rank 1" + master_port, "NMT_RENDEZVOUS_SECRET=another-secret-0123456789");
  ::kill(master.pid, SIGKILL);
  wait_for_exit(master.pid, 10);
  CHECK(impostor.status == 1);
  CHECK(impostor.output.find("rank 1: rank 0 at 127.0.0.1:" + std::to_string(port) +
                             " refused this rank's proof of the run's secret") != std::string::npos);

  const CommandResult half = run_nmt(tiny_train_arguments(dir("errors"), 2, 2) + " --overwrite", "RANK=1");
  CHECK(half.status == 1);
  CHECK(half.output.find("set WORLD_SIZE or --world-size too") != std::string::npos);

  const CommandResult both = run_nmt(tiny_train_arguments(dir("errors"), 2, 2) + " --nproc 2", "RANK=0 WORLD_SIZE=2");
  CHECK(both.status == 1);
  CHECK(both.output.find("--nproc starts its own ranks, but RANK=0 is set") != std::string::npos);
}

}  // namespace nmt::testing

TEST_CASE("distributed: what the other ranks read from the store is checked before it is used", "[distributed]") {
  // Anyone who reaches the store's port can write a key: a forged or damaged value is an error
  // naming it, never a crash in LibTorch's unpickler or a NaN learning rate on every rank.
  const ValidationDecision decision =
      parse_decision(R"({"learning_rate": 0.001, "stop_reason": "", "divergence": ""})");
  CHECK(decision.learning_rate == 0.001);
  for (const std::string& bad :
       {std::string(""), std::string("[]"),
        std::string(R"({"learning_rate": -1, "stop_reason": "", "divergence": ""})"),
        std::string(R"({"learning_rate": null, "stop_reason": "", "divergence": ""})"),
        std::string(R"({"learning_rate": 1e400, "stop_reason": "", "divergence": ""})"),
        std::string(R"({"learning_rate": 0.1, "stop_reason": ")") + std::string(5000, 'x') + R"(", "divergence": ""})",
        std::string(R"({"learning_rate": 0.1, "stop_reason": ""})")}) {
    INFO(bad.substr(0, 80));
    CHECK_THROWS_WITH(parse_decision(bad), Catch::Contains("validation decision read from the rendezvous store"));
  }
  CHECK(parse_setup(R"({"step": 4, "epoch": 1, "batch_in_epoch": 2, "learning_rate": 0.5})").step == 4);
  CHECK_THROWS_WITH(parse_setup(R"({"step": -4, "epoch": 1, "batch_in_epoch": 2, "learning_rate": 0.5})"),
                    Catch::Contains("rank 0's setup read from the rendezvous store is not valid"));

  // The optimizer state is read as a checkpoint's records are: every length checked, and the
  // data's checksum.
  torch::manual_seed(1);
  torch::Tensor weight = torch::randn({16, 8}, torch::requires_grad());
  FusedAdam optimizer({weight}, torch::optim::AdamOptions(1e-3));
  weight.sum().backward();
  optimizer.step();
  TensorFile state;
  write_adam_state(state, optimizer);
  const std::string bytes = state.serialize();
  torch::Tensor copy = weight.detach().clone().requires_grad_();
  FusedAdam received({copy}, torch::optim::AdamOptions(1e-3));
  CHECK_NOTHROW(load_optimizer_bytes(bytes, received));
  std::string flipped = bytes;
  flipped[bytes.size() - 9] = static_cast<char>(flipped[bytes.size() - 9] ^ 0x5a);  // inside exp_avg_sq
  CHECK_THROWS_WITH(load_optimizer_bytes(flipped, received),
                    Catch::Contains("optimizer state read from the rendezvous store is not valid") &&
                        Catch::Contains("fails its checksum"));
  CHECK_THROWS_WITH(load_optimizer_bytes(bytes.substr(0, bytes.size() - 100), received),
                    Catch::Contains("bytes after the last tensor") || Catch::Contains("runs past the file") ||
                        Catch::Contains("outside the file"));
  FusedAdam other({copy, weight}, torch::optim::AdamOptions(1e-3));
  CHECK_THROWS_WITH(load_optimizer_bytes(bytes, other), Catch::Contains("written for another model"));
}
