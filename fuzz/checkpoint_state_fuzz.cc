// Fuzz target: a checkpoint's trainer_state.json through parse_trainer_state (what --resume
// reads first), then the settings comparison a resume makes against the current run.
#include "fuzz_common.h"
#include "lmstack/train/checkpoint_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmstack::fuzz::run_one([&] {
    const auto s = lmstack::train::parse_trainer_state(
        std::string(lmstack::fuzz::as_text(data, size)), "trainer_state.json");
    (void)(s.settings == lmstack::Json::object());
    (void)s.settings.dump();
  });
  return 0;
}
