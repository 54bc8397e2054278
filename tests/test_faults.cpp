// The fault catalogue: a full disk, a closed standard output, a diverging run, a damaged
// last.ckpt, a kill at any moment. Each case asserts the message and that nothing written before
// was lost.
#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "cli_helpers.h"
#include "helpers.h"
#include "inference/model.h"
#include "process_helpers.h"
#include "text/corpus.h"
#include "train/checkpoint.h"
#include "util/io.h"
#include "util/team.h"

extern char** environ;

using namespace nmt;
using namespace nmt::testing;
namespace fs = std::filesystem;

namespace {

fs::path fresh(const std::string& name) {
  const fs::path dir = work_directory() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) names.push_back(entry.path().string());
  }
  return names;
}

TrainingCheckpoint load_last(const fs::path& model_dir) {
  return load_training_checkpoint((model_dir / "last.ckpt").string(), torch::kCPU);
}

bool same_parameters(const TrainingCheckpoint& a, const TrainingCheckpoint& b) {
  const auto pa = a.model.network->parameters(), pb = b.model.network->parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (!torch::equal(pa[i], pb[i])) return false;
  }
  return true;
}

bool all_finite(const TrainingCheckpoint& checkpoint) {
  for (const auto& parameter : checkpoint.model.network->parameters()) {
    if (!torch::isfinite(parameter).all().item<bool>()) return false;
  }
  return true;
}

// The bytes of every checkpoint in model_dir, by file name.
std::map<std::string, std::string> checkpoint_bytes(const fs::path& model_dir) {
  std::map<std::string, std::string> bytes;
  for (const auto& entry : fs::directory_iterator(model_dir)) {
    if (entry.path().extension() == ".ckpt") bytes[entry.path().filename().string()] = read_file(entry.path().string());
  }
  return bytes;
}

// --resume goes on with the learning rate stored in last.ckpt, not with --learning-rate: sets it there.
void store_learning_rate(const fs::path& model_dir, double learning_rate) {
  const std::string path = (model_dir / "last.ckpt").string();
  TrainingCheckpoint state = load_training_checkpoint(path, torch::kCPU);
  torch::optim::Adam optimizer(state.model.network->parameters(), torch::optim::AdamOptions(learning_rate));
  restore_optimizer(state, path, optimizer);
  state.progress.learning_rate = learning_rate;
  save_checkpoint(path, state, &optimizer);
}

}  // namespace

TEST_CASE("faults: a write that fails names the file and the reason", "[faults]") {
  // /dev/full: every write fails with ENOSPC, as on a full disk.
  OutputFile out("/dev/full", "model/last.ckpt");
  CHECK_THROWS_WITH(
      [&] {
        out.write(std::string(1 << 16, 'x'));
        out.close();
      }(),
      Catch::Contains("model/last.ckpt") && Catch::Contains("No space left on device"));
}

TEST_CASE("faults: a full disk during a checkpoint save is an error, last.ckpt and no temporary file remain",
          "[faults]") {
  const fs::path dir = fresh("disk_full");
  const fs::path model = dir / "model";
  REQUIRE(run_nmt(tiny_train_arguments(model.string(), 2, 2)).status == 0);
  const std::string before = read_file((model / "last.ckpt").string());
  REQUIRE(before.size() > 40 * 1024);
  // A 40 KB file-size limit: the log and config fit, a checkpoint does not (EFBIG, as a full disk).
  const CommandResult result = run_shell("ulimit -f 40; " + std::string(NMT_BINARY) + " " +
                                         tiny_train_arguments(model.string(), 4, 2) + " --resume 2>&1");
  CHECK(result.status == 1);
  CHECK_THAT(result.output, Catch::Contains("last.ckpt: write failed (File too large)"));
  CHECK_THAT(result.output, !Catch::Contains("terminate"));
  CHECK(read_file((model / "last.ckpt").string()) == before);
  CHECK(temporaries(model).empty());
  CHECK(load_last(model).progress.step == 2);
}

TEST_CASE("faults: a closed or full standard output is reported and the exit status says so", "[faults]") {
  const fs::path dir = fresh("stdout");
  const fs::path model = dir / "model";
  REQUIRE(run_nmt(tiny_train_arguments(model.string())).status == 0);
  const std::string translate =
      std::string(NMT_BINARY) + " translate --model " + model.string() + " --input " + kToy + "/dev.src --threads 1";
  for (const char* redirect : {" >/dev/full", " >&-"}) {
    INFO(redirect);
    const CommandResult result = run_shell(translate + " 2>&1" + redirect);
    CHECK(result.status == 1);
    CHECK_THAT(result.output, Catch::Contains("standard output: write failed"));
  }
  // A pipe whose reader has gone: a message, not a silent SIGPIPE.
  const CommandResult closed = run_shell("exec 3>&1; " + translate + " 2>&3 | true");
  CHECK_THAT(closed.output, Catch::Contains("standard output: write failed (Broken pipe)"));
}

TEST_CASE("faults: a diverging run skips its updates, stops after max-skipped-steps, and saves nothing", "[faults]") {
  const fs::path dir = fresh("diverge");
  const fs::path model = dir / "model";
  // No validation before the stop: the first update's weights give a dev loss of millions of nats
  // a token, which a validation would stop at as a divergence of its own (the next case).
  const CommandResult result = run_nmt(tiny_train_arguments(model.string(), 60, 100) +
                                       " --learning-rate 1e6 --clip-norm 0 --max-skipped-steps 3");
  INFO(result.output);
  CHECK(result.status == 1);
  CHECK_THAT(result.output, Catch::Contains("step 4: update skipped") && Catch::Contains("3 in a row"));
  CHECK_THAT(result.output, Catch::Contains("training diverged at step 4: 3 updates in a row skipped") &&
                                Catch::Contains("no checkpoint was written before") &&
                                Catch::Contains("lower learning-rate or set clip-norm, then --overwrite"));
  CHECK(checkpoint_bytes(model).empty());
}

// --learning-rate 1e30: an update leaves finite but enormous weights, whose dev loss at the next
// validation is not a number (Debian's LibTorch, OpenBLAS) or about 1e31 nats a token (LibTorch
// 2.x from pip, MKL), and whose BLEU is 0, which once made them best.ckpt.
TEST_CASE("faults: a validation whose dev loss is not finite is never best, saves nothing and stops the run",
          "[faults]") {
  const fs::path dir = fresh("dev_loss_nan");
  SECTION("at the first validation: no checkpoint is written") {
    const fs::path model = dir / "fresh";
    const CommandResult result =
        run_nmt(tiny_train_arguments(model.string(), 6, 2) + " --learning-rate 1e30 --keep-checkpoints 2");
    INFO(result.output);
    CHECK(result.status == 1);
    CHECK_THAT(result.output, Catch::Contains("training diverged at step 2: the dev loss is ") &&
                                  Catch::Contains("no checkpoint was written before") &&
                                  Catch::Contains("then --overwrite"));
    CHECK(checkpoint_bytes(model).empty());
    const std::string metrics = read_file((model / "metrics.jsonl").string());
    CHECK_THAT(metrics, Catch::Contains("\"event\":\"validation\",\"step\":2,") && Catch::Contains("\"best\":0") &&
                            !Catch::Contains("\"best\":1"));
  }
  SECTION("after a good validation: best.ckpt, last.ckpt and the kept step checkpoints stay as they were") {
    const fs::path model = dir / "resumed";
    REQUIRE(run_nmt(tiny_train_arguments(model.string(), 2, 2) + " --keep-checkpoints 2").status == 0);
    store_learning_rate(model, 1e30);
    const std::map<std::string, std::string> before = checkpoint_bytes(model);
    REQUIRE(before.size() == 3);  // best.ckpt, last.ckpt, step-00000002.ckpt
    const CommandResult result =
        run_nmt(tiny_train_arguments(model.string(), 6, 2) + " --keep-checkpoints 2 --learning-rate 1e30 --resume");
    INFO(result.output);
    CHECK(result.status == 1);
    CHECK_THAT(result.output,
               Catch::Contains("training diverged at step 4: the dev loss is ") &&
                   Catch::Contains((model / "best.ckpt").string() + " (step 2) and " + (model / "last.ckpt").string() +
                                   " (step 2) hold the last good weights") &&
                   Catch::Contains("--resume"));
    CHECK(checkpoint_bytes(model) == before);
  }
}

// Rank 0 validates; the other rank learns of the divergence through the decision it waits for, and
// ends with the same error at once rather than finding rank 0 gone.
TEST_CASE("faults: with two ranks, a validation whose dev loss is not finite ends both with its error", "[faults]") {
  const fs::path dir = fresh("dev_loss_nan_ranks");
  const fs::path model = dir / "model";
  const std::string rank = std::string(NMT_BINARY) + " " + tiny_train_arguments(model.string(), 6, 2) +
                           " --learning-rate 1e30 --world-size 2 --dist-timeout 30 --master-port " +
                           std::to_string(loopback_port()) + " --rank ";
  const std::string logs[2] = {(dir / "rank0.log").string(), (dir / "rank1.log").string()};
  const auto start = std::chrono::steady_clock::now();
  const CommandResult result = run_shell(rank + "1 >" + logs[1] + " 2>&1 & " + rank + "0 >" + logs[0] +
                                         " 2>&1; first=$?; wait $!; echo $first $?");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& log : logs) {
    INFO(log << ":\n" << read_file(log));
    CHECK_THAT(read_file(log), Catch::Contains("training diverged at step 2: the dev loss is "));
  }
  CHECK(result.output == "1 1\n");
  CHECK(seconds < 25);  // both at once, well within --dist-timeout 30
  CHECK(checkpoint_bytes(model).empty());
}

TEST_CASE("faults: a damaged last.ckpt on --resume says what --resume can do", "[faults]") {
  const fs::path dir = fresh("damaged");
  const fs::path model = dir / "model";
  REQUIRE(run_nmt(tiny_train_arguments(model.string())).status == 0);
  const std::string bytes = read_file((model / "last.ckpt").string());
  write_file_atomic((model / "last.ckpt").string(), bytes.substr(0, bytes.size() / 3));
  const CommandResult result = run_nmt(tiny_train_arguments(model.string(), 6) + " --resume");
  CHECK(result.status == 1);
  CHECK_THAT(result.output, Catch::Contains("last.ckpt") && Catch::Contains("--overwrite"));
  CHECK_THAT(result.output, !Catch::Contains("--checkpoint best|last"));
  CHECK(fs::exists(model / "best.ckpt"));
}

TEST_CASE("faults: a checkpoint with one byte changed is refused by its checksum", "[faults]") {
  const fs::path dir = fresh("flipped");
  const fs::path model = dir / "model";
  REQUIRE(run_nmt(tiny_train_arguments(model.string())).status == 0);
  std::string bytes = read_file((model / "best.ckpt").string());
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);  // inside a weight record
  const std::string flipped = (dir / "flipped.ckpt").string();
  write_file_atomic(flipped, bytes);
  CHECK_THROWS_WITH(load_model(flipped, torch::kCPU),
                    Catch::Contains(flipped + ": a damaged checkpoint") && Catch::Contains("fails its checksum"));
  const CommandResult result = run_nmt("translate --model " + model.string() + " --checkpoint " + flipped +
                                       " --input " + kToy + "/dev.src --threads 1");
  CHECK(result.status == 1);
  CHECK_THAT(result.output, Catch::Contains("fails its checksum") && Catch::Contains("--checkpoint"));
}

TEST_CASE("faults: vocab-size values sentencepiece cannot reach are refused naming the key", "[faults]") {
  const fs::path dir = fresh("vocab_size");
  CommandResult result = run_nmt(tiny_train_arguments((dir / "small").string()) + " --vocab-size 10");
  CHECK(result.status == 1);
  CHECK_THAT(result.output, Catch::Contains("vocab-size 10 cannot be reached") && Catch::Contains("vocab-size"));
  result = run_nmt(tiny_train_arguments((dir / "huge").string()) + " --vocab-size 2000000000");
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains("vocab-size") && Catch::Contains("must be in 8.."));
}

TEST_CASE("faults: a dev line over dev-max-length is named by file and line before training", "[faults]") {
  const fs::path dir = fresh("dev_length");
  std::vector<std::string> lines = read_lines(kToy + "/dev.src");
  std::string huge;
  for (int i = 0; i < 20000; ++i) huge += "the frog sees the bridge . ";
  lines[4] = huge;  // 540 KB
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  const std::string dev = (dir / "dev.src").string();
  write_file_atomic(dev, text);
  const CommandResult result =
      run_nmt(tiny_train_arguments((dir / "model").string()) + " --dev-source " + dev + " --dev-max-length 500");
  CHECK(result.status == 1);
  CHECK_THAT(result.output, Catch::Contains(dev + ":5:") && Catch::Contains("more than dev-max-length 500"));
  CHECK(!fs::exists(dir / "model" / "last.ckpt"));
}

TEST_CASE("faults: an exception between a team's phases or inside one is rethrown, never a hang", "[faults]") {
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  for (const bool inside : {false, true}) {
    INFO((inside ? "inside a phase" : "between phases"));
    std::atomic<int> phases{0};
    const auto body = [&](Team& team) {
      const bool last = team.share(2).second == 2;  // the team's last thread (or its only one)
      for (int i = 0; i < 100; ++i) {
        if (!inside && last && i == 3) throw std::runtime_error("failed at 3");
        team.phase([&] {
          if (inside && last && i == 3) throw std::runtime_error("failed at 3");
          ++phases;
        });
      }
    };
    CHECK_THROWS_WITH(run_as_team(body), "failed at 3");
    CHECK(phases.load() <= 2 * 4);  // the phases after the failure were skipped
  }
  at::set_num_threads(threads);
}

// A tiny run with dropout, killed with SIGKILL at random moments and resumed each time: every
// kill leaves a model directory that loads and resumes, and the run ends with the parameters of
// one that was never interrupted.
TEST_CASE("faults: kill -9 at random moments, resume each time, same parameters as an uninterrupted run",
          "[faults][slow][kill]") {
  const fs::path dir = fresh("kill");
  const std::string arguments =
      tiny_train_arguments((dir / "MODEL").string(), 24, 2) + " --dropout 0.3 --early-stopping-patience 0";
  const auto for_model = [&](const fs::path& model) {
    std::string text = arguments;
    text.replace(text.find((dir / "MODEL").string()), (dir / "MODEL").string().size(), model.string());
    return text;
  };
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(run_nmt(for_model(dir / "whole")).status == 0);
  const auto run_time = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  const TrainingCheckpoint whole = load_last(dir / "whole");
  REQUIRE(whole.progress.step == 24);

  const fs::path model = dir / "killed";
  std::mt19937 random(7);
  int kills = 0, kills_while_resuming = 0;
  const fs::path last = model / "last.ckpt";
  const auto saved = [&] { return fs::exists(last) ? fs::last_write_time(last) : fs::file_time_type::min(); };
  for (int attempt = 0; attempt < 10; ++attempt) {
    const bool resume = fs::exists(model / "last.ckpt");
    if (resume) {
      const TrainingCheckpoint loaded = load_last(model);  // loads after every kill
      CHECK(all_finite(loaded));
      if (loaded.progress.step == 24) break;
    }
    const std::string command = "exec " + std::string(NMT_BINARY) + " " + for_model(model) +
                                (resume ? " --resume" : " --overwrite") + " >/dev/null 2>&1";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t pid = 0;
    REQUIRE(::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
    // Every other time at a random moment of the start (vocabulary, corpus, loading), else within
    // a step or two after a save, when checkpoints are being written.
    const auto saved_before = saved();
    const int64_t count = run_time.count();
    if (attempt % 2 == 0) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(count / 10, count * 6 / 10)(random)));
    } else {
      for (int poll = 0; poll < 1000 && saved() == saved_before; ++poll) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(0, count / 24)(random)));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) ++kills, kills_while_resuming += resume ? 1 : 0;
  }
  INFO(kills << " kills, " << kills_while_resuming << " of them while resuming");
  CHECK(kills_while_resuming >= 2);
  REQUIRE(run_nmt(for_model(model) + " --resume").status == 0);
  CHECK(temporaries(model).empty());
  const TrainingCheckpoint resumed = load_last(model);
  CHECK(resumed.progress.step == 24);
  CHECK(same_parameters(resumed, whole));
}

TEST_CASE("faults: --overwrite keeps the old run aside until the new one has a checkpoint", "[faults]") {
  const fs::path dir = fresh("overwrite_aside");
  const fs::path model = dir / "model";
  REQUIRE(run_nmt(tiny_train_arguments(model.string(), 2, 2) + " --keep-checkpoints 1").status == 0);
  REQUIRE(run_nmt("average --model " + model.string()).status == 0);
  const std::map<std::string, std::string> before = checkpoint_bytes(model);
  REQUIRE(before.count("averaged.ckpt") == 1);
  // A new run that diverges at its first validation: the old model is still there, whole. (All of
  // it was deleted as the new run started.)
  const CommandResult diverged =
      run_nmt(tiny_train_arguments(model.string(), 6, 2) + " --learning-rate 1e30 --overwrite");
  INFO(diverged.output);
  CHECK(diverged.status == 1);
  CHECK(checkpoint_bytes(model / "previous-run") == before);
  CHECK(fs::exists(model / "previous-run" / "config.toml"));
  CHECK(fs::exists(model / "previous-run" / "vocab.joint.model"));
  // Divergence reaches train.log, not only the console.
  CHECK_THAT(read_file((model / "train.log").string()), Catch::Contains("training diverged at step 2"));
  // Both the error and a translation from the emptied directory name where the old model waits.
  const std::string waits = (model / "previous-run").string() + "/ still holds the model an --overwrite run replaced";
  CHECK_THAT(diverged.output, Catch::Contains("no checkpoint was written before") && Catch::Contains(waits));
  const CommandResult emptied =
      run_nmt("translate --model " + model.string() + " --input " + kToy + "/dev.src --max-length 4 --threads 1");
  INFO(emptied.output);
  CHECK(emptied.status == 1);
  CHECK_THAT(emptied.output, Catch::Contains("checkpoint not found") && Catch::Contains(waits) &&
                                 Catch::Contains("move its files back into " + model.string()));
  CHECK(run_nmt("translate --model " + (model / "previous-run").string() + " --input " + kToy +
                "/dev.src --max-length 4 --threads 1")
            .status == 0);
  // A second --overwrite that saves nothing keeps the same old run aside.
  CHECK(run_nmt(tiny_train_arguments(model.string(), 6, 2) + " --learning-rate 1e30 --overwrite").status == 1);
  CHECK(checkpoint_bytes(model / "previous-run") == before);
  // Once a new run has written a checkpoint, the old one goes.
  const CommandResult replaced = run_nmt(tiny_train_arguments(model.string(), 2, 2) + " --overwrite");
  INFO(replaced.output);
  CHECK(replaced.status == 0);
  CHECK_FALSE(fs::exists(model / "previous-run"));
  CHECK_FALSE(fs::exists(model / "averaged.ckpt"));
  CHECK(fs::exists(model / "best.ckpt"));

  // A plain new run refuses a directory that holds only an averaged model (it once deleted it).
  const fs::path averaged_only = dir / "averaged_only";
  fs::create_directories(averaged_only);
  fs::copy_file(model / "best.ckpt", averaged_only / "averaged.ckpt");
  const std::string kept = read_file((averaged_only / "averaged.ckpt").string());
  const CommandResult refused = run_nmt(tiny_train_arguments(averaged_only.string(), 2, 2));
  CHECK(refused.status != 0);
  CHECK_THAT(refused.output, Catch::Contains("already holds averaged.ckpt"));
  CHECK(read_file((averaged_only / "averaged.ckpt").string()) == kept);
}

TEST_CASE("faults: --resume with another --learning-rate trains at it, and config.toml says so", "[faults]") {
  const fs::path model = fresh("resume_rate") / "model";
  REQUIRE(run_nmt(tiny_train_arguments(model.string(), 2, 2) + " --learning-rate 0.003").status == 0);
  const CommandResult resumed =
      run_nmt(tiny_train_arguments(model.string(), 4, 2) + " --learning-rate 0.0005 --resume --log-every 1");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.output, Catch::Contains("learning-rate 0.0005 replaces the run's 0.003"));
  // Step 3 ran at the new rate (it once ran at the stored 0.003 while config.toml said 5e-04).
  std::string step_3;
  for (const std::string& line : split_lines(read_file((model / "metrics.jsonl").string()))) {
    if (line.find("\"event\":\"train\",\"step\":3,") != std::string::npos) step_3 = line;
  }
  CHECK_THAT(step_3, Catch::Contains("\"learning_rate\":0.0005"));
  CHECK_THAT(read_file((model / "config.toml").string()), Catch::Contains("learning-rate = 5e-04"));
  const TrainingCheckpoint last = load_training_checkpoint((model / "last.ckpt").string(), torch::kCPU);
  CHECK(last.progress.learning_rate == Approx(0.0005));
}

TEST_CASE("faults: a checkpoint's model options are checked before a model is built from them", "[faults]") {
  const fs::path model = fresh("checkpoint_options") / "model";
  REQUIRE(run_nmt(tiny_train_arguments(model.string(), 2, 2) + " --attention multi-head --attention-heads 2").status ==
          0);
  const std::string best = (model / "best.ckpt").string();
  TrainingCheckpoint state = load_training_checkpoint(best, torch::kCPU);
  state.config.model.attention_heads = 0;
  save_checkpoint(best, state, nullptr);
  // Read in another process: before the check, the model's constructor divided by zero (SIGFPE).
  const CommandResult result =
      run_nmt("translate --model " + model.string() + " --input " + kToy + "/dev.src --threads 1");
  INFO(result.output);
  CHECK(result.status == 1);
  CHECK_THAT(result.output, Catch::Contains(best + ": its model options are invalid") &&
                                Catch::Contains("attention-heads") && Catch::Contains("must be at least 1"));
}
