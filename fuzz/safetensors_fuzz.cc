// Fuzz target: a safetensors file (8-byte length, JSON header, data) through
// parse_safetensors_header; an input starting with '{' is read as a
// model.safetensors.index.json instead (SafetensorsSet::open_index; its shards do not exist,
// so a valid index ends in an IoError naming the first one).
#include <sys/stat.h>

#include "fuzz_common.h"
#include "lmstack/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == '{') {
    static const std::string dir = [] {
      const std::string d = lmstack::fuzz::scratch_path("index");
      mkdir(d.c_str(), 0700);
      return d;
    }();
    const std::string path = dir + "/model.safetensors.index.json";
    lmstack::fuzz::write_input(path, lmstack::fuzz::as_text(data, size));
    lmstack::fuzz::run_one([&] { lmstack::model::SafetensorsSet::open_index(path); });
    return 0;
  }
  lmstack::fuzz::run_one([&] {
    lmstack::Json metadata;
    size_t data_offset = 0;
    lmstack::model::parse_safetensors_header(data, size, "input.safetensors", &metadata,
                                             &data_offset);
  });
  return 0;
}
