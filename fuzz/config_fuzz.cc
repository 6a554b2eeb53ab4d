// Fuzz target: config.json text through parse_json (depth-limited) and ModelConfig::from_json,
// then the derived sizes a loader computes from it.
#include "fuzz_common.h"
#include "lmstack/core/json.h"
#include "lmstack/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmstack::fuzz::run_one([&] {
    const lmstack::Json j =
        lmstack::parse_json(std::string(lmstack::fuzz::as_text(data, size)), "config.json");
    const auto c = lmstack::model::ModelConfig::from_json(j, "config.json");
    (void)c.to_json();
  });
  return 0;
}
