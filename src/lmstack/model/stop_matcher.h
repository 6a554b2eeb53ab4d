// Stop strings over streamed text. Tokens arrive as text pieces; a stop string may span
// several of them, so the matcher holds back the longest tail that could still begin a stop
// string and releases it once it cannot (OpenAI semantics: the stop string itself and
// everything after it are not returned).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lmstack::model {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Adds generated text; returns the text that is now safe to emit. After a stop string
  // matched, stopped() is true and further pushes return "".
  std::string push(std::string_view text);
  // The held-back text, at the end of generation (empty once stopped).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace lmstack::model
