// nmt train: a training run from a configuration file and options, on one process or several
// (train/trainer.h, train/distributed.h).
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "cli/command.h"
#include "train/launcher.h"

namespace nmt::cli {

namespace {

// What to do with a run and with the configuration: the command line's choice, never a shared file's.
void add_run_flags(CLI::App& command, TrainCommand& train) {
  CLI::Option* resume =
      command.add_flag("--resume", train.run.resume, "continue the run in --model-dir from last.ckpt")
          ->configurable(false);
  command.add_flag("--overwrite", train.run.overwrite, "start again even if --model-dir holds a run")
      ->excludes(resume)
      ->configurable(false);
  command.add_flag("--dump-config", train.dump_config, "print the effective configuration and exit")
      ->configurable(false);
}

// Several processes (train/distributed.h): started by nmt itself, or by torchrun, SLURM or any
// launcher through the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, and the
// secret the ranks prove, NMT_RENDEZVOUS_SECRET).
void add_distributed_options(CLI::App& command, TrainCommand& train) {
  DistributedOptions& distributed = train.run.distributed;
  const std::string group =
      "Distributed (environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, NMT_RENDEZVOUS_SECRET)";
  const auto add = [&](const std::string& name, auto& value, const std::string& help) {
    return command.add_option(name, value, help)->group(group)->configurable(false);
  };
  add("--nproc", train.nproc, "start this many ranks on this machine and supervise them")->check(CLI::Range(1, 1024));
  add("--rank", distributed.rank, "this process's rank (RANK)");
  add("--world-size", distributed.world_size, "number of ranks (WORLD_SIZE)");
  add("--local-rank", distributed.local_rank, "rank among this machine's (LOCAL_RANK)");
  add("--master-addr", distributed.master_addr,
      "rank 0's address, the only one its rendezvous listens on (MASTER_ADDR; 127.0.0.1)");
  add("--master-port", distributed.master_port, "rank 0's port (MASTER_PORT; 29500)")->check(CLI::Range(1, 65535));
  add("--rendezvous-secret-file", distributed.secret_file,
      "a file (mode 600) whose first line is the secret every rank proves (else NMT_RENDEZVOUS_SECRET)");
  add("--dist-timeout", distributed.timeout_seconds, "seconds a rank waits for a silent peer before the run stops")
      ->capture_default_str();
  add("--check-replicas", distributed.check_replicas,
      "compare the ranks' weights every N updates (0: at validations only)");
}

}  // namespace

Command add_train(CLI::App& program, const Invocation& invocation, std::shared_ptr<TrainCommand> train) {
  CLI::App* command = program.add_subcommand("train", "train a model from a configuration file and/or options");
  command->fallthrough();  // --config after the command name reaches the program's option
  add_train_options(*command, train->config);
  add_run_flags(*command, *train);
  add_distributed_options(*command, *train);
  return {command, [train, &invocation] {
            if (train->dump_config) {
              std::cout << to_toml(train->config);
            } else if (train->nproc > 1) {
              const DistributedOptions& distributed = train->run.distributed;
              return launch_workers(invocation.program, without_nproc(invocation.arguments), train->nproc,
                                    distributed.master_addr, distributed.master_port);
            } else {
              nmt::train(train->config, train->run);
            }
            return 0;
          }};
}

}  // namespace nmt::cli
