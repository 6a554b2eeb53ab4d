// Fuzz target: a token shard (train/data.h: 32-byte header, then token ids) through read_shard.
#include "fuzz_common.h"
#include "lmstack/train/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lmstack::fuzz::scratch_path("train-00000.bin");
  lmstack::fuzz::write_input(path, lmstack::fuzz::as_text(data, size));
  lmstack::fuzz::run_one([&] { lmstack::train::read_shard(path); });
  return 0;
}
