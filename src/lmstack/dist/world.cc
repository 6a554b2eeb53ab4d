// world() and abort_all(): the one place that decides between MPI and a world of one, so a
// single-process run needs no launcher (issue 14 item 1).
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "lmstack/dist/comm.h"
#include "lmstack/dist/comm_local.h"
#include "lmstack/dist/comm_mpi.h"

namespace lmstack::dist {
namespace {

Comm* g_world = nullptr;  // set once by world(); never freed (MPI finalizes at exit)

}  // namespace

bool launched_by_mpi() {
  // OpenMPI's mpirun sets OMPI_COMM_WORLD_SIZE; MPICH/Hydra and Slurm set PMI_SIZE; PMIx
  // launchers set PMIX_RANK.
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

Comm& world() {
  static std::once_flag once;
  std::call_once(
      once, [] { g_world = (launched_by_mpi() ? make_mpi_world() : make_self_comm()).release(); });
  return *g_world;
}

void abort_all(const std::string& why, int exit_code) {
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* env_size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (g_world)
    std::fprintf(stderr, "lmstack: rank %d of %d: %s\n", g_world->rank(), g_world->size(),
                 why.c_str());
  else if (env_rank && env_size)  // launched by mpirun, failed before world() was needed
    std::fprintf(stderr, "lmstack: rank %s of %s: %s\n", env_rank, env_size, why.c_str());
  else
    std::fprintf(stderr, "lmstack: %s\n", why.c_str());
  std::fflush(stderr);
  if (g_world && g_world->backend() == "mpi" && mpi_active()) mpi_abort(exit_code);
  std::_Exit(exit_code);
}

}  // namespace lmstack::dist
