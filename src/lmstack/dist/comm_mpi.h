// The MPI backend (OpenMPI 4.1 from Debian; any MPI-3 library works). Only world.cc creates
// one; everything else sees a Comm. Kept free of <mpi.h> so that no other file needs MPI's
// headers.
#pragma once

#include <memory>

#include "lmstack/dist/comm.h"

namespace lmstack::dist {

// Initializes MPI (MPI_Init_thread with MPI_THREAD_MULTIPLE, else DistError), registers
// MPI_Finalize at exit and returns MPI_COMM_WORLD as a Comm whose errors return (MPI_ERRORS_RETURN)
// and throw DistError naming call and rank.
std::unique_ptr<Comm> make_mpi_world();

// True once MPI_Init has run and MPI_Finalize has not.
bool mpi_active();

// MPI_Abort(MPI_COMM_WORLD, code): mpirun then kills every rank.
[[noreturn]] void mpi_abort(int code);

}  // namespace lmstack::dist
