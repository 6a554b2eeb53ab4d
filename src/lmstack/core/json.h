// JSON (nlohmann::json) plus helpers that turn a missing or mistyped field into a ConfigError
// naming the source and the field: require<int>(j, "hidden_size", "config.json").
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "lmstack/core/error.h"

namespace lmstack {

using Json = nlohmann::json;

// Parses text; FormatError "<source>: invalid JSON at byte N" or nesting past json_depth.h.
Json parse_json(const std::string& text, const std::string& source);
// Reads and parses a file (IoError / FormatError naming the path).
Json read_json_file(const std::string& path);

// Whether the JSON number `v` converts to the integer type T without overflow.
template <class T>
bool json_number_fits(const Json& v) {
  using Lim = std::numeric_limits<T>;
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(Lim::max());
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    return x < 0 ? x >= int64_t(Lim::min()) : uint64_t(x) <= uint64_t(Lim::max());
  }
  // 2 * (max / 2 + 1) is max + 1 computed without overflow, exact as a double.
  const double x = v.get<double>();
  return std::isfinite(x) && x >= double(Lim::min()) && x < 2.0 * double(Lim::max() / 2 + 1);
}

// The field `key` of object `j` as T; ConfigError if absent or of the wrong type.
template <class T>
T require(const Json& j, const std::string& key, const std::string& source) {
  if (!j.is_object() || !j.contains(key))
    throw_error<ConfigError>("{}: missing required field '{}'", source, key);
  const Json& v = j.at(key);
  // nlohmann converts an out-of-range number to an integer by a plain cast (undefined for
  // 1.3e31 as int, a silent wrap for 2^40): check the range first (fuzz finding, issue 13).
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (v.is_number() && !json_number_fits<T>(v))
      throw_error<ConfigError>("{}: field '{}' is {}, outside the range of its integer type",
                               source, key, v.dump());
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw_error<ConfigError>("{}: field '{}' has the wrong type ({})", source, key, v.type_name());
  }
}

// The field as T, or `fallback` when absent or null; ConfigError if present with a wrong type.
template <class T>
T optional(const Json& j, const std::string& key, const T& fallback, const std::string& source) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
  return require<T>(j, key, source);
}

}  // namespace lmstack
