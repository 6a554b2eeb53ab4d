// JSON parsing with errors that name their source (see json.h).
#include "lmstack/core/json.h"

#include "lmstack/core/file.h"

namespace lmstack {

Json parse_json(const std::string& text, const std::string& source) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw_error<FormatError>("{}: invalid JSON at byte {}: {}", source, e.byte, e.what());
  }
}

Json read_json_file(const std::string& path) { return parse_json(read_file(path), path); }

}  // namespace lmstack
