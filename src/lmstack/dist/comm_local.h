// LocalComm: a group of N ranks inside one process, one thread per rank, sharing memory
// (DESIGN.md rule 3: DP/ZeRO tests run in one process first, and under AddressSanitizer,
// where OpenMPI's leaks make LeakSanitizer noisy). A world of one (SelfComm, backend "self")
// is a LocalComm of size 1 whose collectives are copies or no-ops.
//
// Semantics equal MpiComm's: collectives match by call order on each rank (the k-th
// collective of rank 0 meets the k-th of every other rank), each rank's input is copied when
// the call starts, so in-place and overlapping buffers are safe and a non-blocking call may be
// waited in any order; reductions add ranks in order 0..N-1 (bf16 in f32, rounded once), so
// every rank gets bit-identical results. send copies into a mailbox (completes at once); recv
// waits for the matching (source, tag) message.
//
// Failure: when one rank's thread throws, run_local() aborts the group, and every rank
// blocked (or later blocking) in a collective or recv throws DistError naming that rank.
// Thread safety: each Comm is used by its own rank's thread; groups are safe across threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/dist/comm.h"

namespace lmstack::dist {

// A world of one: what world() returns when no MPI launcher started this process.
std::unique_ptr<Comm> make_self_comm();

// N connected ranks; comm i has rank i. Hand each to its own thread.
std::vector<std::unique_ptr<Comm>> make_local_group(int n);

// Runs fn(comm) on n threads, one per rank of a fresh local group, and joins them. If any rank
// throws, the group is aborted (the others' pending calls throw DistError naming it) and the
// first exception is rethrown here, after every thread has ended.
void run_local(int n, const std::function<void(Comm&)>& fn);

}  // namespace lmstack::dist
