// `nmt train --nproc N`: N worker processes of this same program on this machine, started with
// torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
// a rendezvous secret (NMT_RENDEZVOUS_SECRET: the user's, else a new random one) and supervised: the first that fails
// (a non-zero exit or a signal) is named, the others are stopped (SIGTERM, then SIGKILL after a grace period), and
// SIGINT or SIGTERM to nmt reaches every worker.
#pragma once

#include <string>
#include <vector>

namespace nmt {

// Runs `program` with `arguments` (argv[1:], with --nproc already taken out) as `nproc` ranks on
// 127.0.0.1 (or master_addr) at master_port (0: a free port). Returns the exit status for nmt: 0
// when every rank succeeded, 1 when one failed, 128 + signal when nmt was interrupted.
int launch_workers(const std::string& program, const std::vector<std::string>& arguments, int nproc,
                   const std::string& master_addr, int master_port);

// `arguments` without --nproc and its value (as "--nproc N" or "--nproc=N").
std::vector<std::string> without_nproc(const std::vector<std::string>& arguments);

}  // namespace nmt
