// Fuzz target: a NumPy .npy file (core/npy.h: magic, version, header dict, data) via read_npy.
#include "fuzz_common.h"
#include "lmstack/core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lmstack::fuzz::scratch_path("input.npy");
  lmstack::fuzz::write_input(path, lmstack::fuzz::as_text(data, size));
  lmstack::fuzz::run_one([&] { lmstack::read_npy(path); });
  return 0;
}
