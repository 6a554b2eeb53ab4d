// JSON (nlohmann::json) plus helpers that turn a missing or mistyped field into a ConfigError
// naming the source and the field: require<int>(j, "hidden_size", "config.json").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lmstack/core/error.h"

namespace lmstack {

using Json = nlohmann::json;

// Parses text; FormatError "<source>: invalid JSON at byte N" or nesting past json_depth.h.
Json parse_json(const std::string& text, const std::string& source);
// Reads and parses a file (IoError / FormatError naming the path).
Json read_json_file(const std::string& path);

// The field `key` of object `j` as T; ConfigError if absent or of the wrong type.
template <class T>
T require(const Json& j, const std::string& key, const std::string& source) {
  if (!j.is_object() || !j.contains(key))
    throw_error<ConfigError>("{}: missing required field '{}'", source, key);
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw_error<ConfigError>("{}: field '{}' has the wrong type ({})", source, key,
                             j.at(key).type_name());
  }
}

// The field as T, or `fallback` when absent or null; ConfigError if present with a wrong type.
template <class T>
T optional(const Json& j, const std::string& key, const T& fallback, const std::string& source) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
  return require<T>(j, key, source);
}

}  // namespace lmstack
