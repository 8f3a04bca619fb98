// The ranks of a distributed job across the hosts their traces came from:
// which rank on which host leaks, and which do not. A multi-node job writes
// traces on every host; `gpuleak report` on the folders copied from each
// node reads them together, and this is the one view of the job's ranks.
// Ranks come from each process's `distributed` annotation (torchrun's RANK,
// Slurm's SLURM_PROCID, Open MPI's OMPI_COMM_WORLD_RANK), hosts from the
// trace's host name.
//
// Pure function of its input; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report_model.h"

namespace gpuleak::analysis {

struct RankEntry {
  std::int64_t rank = 0;
  std::string host;
  std::uint32_t pid = 0;
  std::string launcher;  // "torchrun", "slurm", "open-mpi", or ""
  bool leak = false;     // the process's verdict leaks (process_verdict.h)
  double rate_bytes_per_step = 0;
  std::string site;  // the fastest-growing site's label, when it leaks
};

struct JobRanks {
  std::vector<RankEntry> ranks;    // by rank, then host
  std::vector<std::string> hosts;  // in order of their lowest rank
  // Rank numbers that more than one process claims (two jobs' traces mixed,
  // or a launcher's variables left in a child's environment).
  std::vector<std::int64_t> repeated;
};

// The job's ranks, or nothing when fewer than two processes are ranks.
std::optional<JobRanks> job_ranks(const std::vector<ProcessReport>& reports);

// "0-3, 5" for a sorted list of ranks.
std::string rank_ranges(const std::vector<std::int64_t>& ranks);

// One sentence for people: "4 ranks on 2 hosts (node-a: 0-1; node-b: 2-3):
// rank 3 on node-b (PID 4242) leaks +1.00 MiB/step at train.py:42; ranks 0-2
// do not."
std::string job_ranks_text(const JobRanks& ranks);

}  // namespace gpuleak::analysis
