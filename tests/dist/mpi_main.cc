// main() of lmstack_dist_mpitests, the binary ctest runs under mpirun (tests/CMakeLists.txt,
// lmstack_add_mpi_test). Differs from gtest_main in two ways a multi-process test needs:
// an exception escaping a test is not caught by gtest but reaches std::terminate, which calls
// abort_all() so that the other ranks end instead of hanging in their next collective; and the
// exit status is the worst over all ranks, so a failure on rank 3 fails the run.
#include <gtest/gtest.h>

#include <exception>

#include "lmstack/dist/comm.h"

namespace {

void terminate_all_ranks() {
  std::string why = "terminate called";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      why = std::string("uncaught exception: ") + x.what();
    } catch (...) {
      why = "uncaught non-standard exception";
    }
  }
  lmstack::dist::abort_all(why);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(catch_exceptions, false);
  std::set_terminate(terminate_all_ranks);
  lmstack::dist::Comm& world = lmstack::dist::world();
  int32_t status = RUN_ALL_TESTS();
  world.all_reduce(&status, 1, lmstack::DType::kI32, lmstack::dist::ReduceOp::kMax);
  return status;
}
