// The built-in tasks of task.h. Operands come from splitmix64 so a seed names the same
// examples everywhere; the held-out split is a hash of the question (FNV-1a), not of the index.
#include "lmstack/rl/task.h"

#include <algorithm>
#include <functional>

#include "lmstack/core/error.h"

namespace lmstack::rl {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool is_held_out(const Example& e) { return fnv1a(e.prompt) % 10 == 0; }

uint64_t below(uint64_t& rng, uint64_t n) { return splitmix64(rng) % n; }

uint64_t power10(int digits) {
  uint64_t p = 1;
  for (int i = 0; i < digits; ++i) p *= 10;
  return p;
}

bool all_of(std::string_view s, const std::function<bool(char)>& f) {
  return !s.empty() && std::all_of(s.begin(), s.end(), f);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Arithmetic : public Task {
 public:
  Arithmetic(char op, int digits) : op_(op), digits_(digits) {}
  std::string name() const override {
    return fmt::format("{}:{}", op_ == '+' ? "add" : "mul", digits_);
  }
  bool is_well_formed(std::string_view a) const override { return all_of(a, is_digit); }

 protected:
  Example draw(uint64_t& rng) const override {
    const uint64_t a = below(rng, power10(digits_)), b = below(rng, power10(digits_));
    return {fmt::format("Q: {}{}{}\nA:", a, op_, b), std::to_string(op_ == '+' ? a + b : a * b)};
  }

 private:
  char op_;
  int digits_;
};

class Reverse : public Task {
 public:
  explicit Reverse(int length) : length_(length) {}
  std::string name() const override { return fmt::format("reverse:{}", length_); }
  bool is_well_formed(std::string_view a) const override {
    return all_of(a, [](char c) { return c >= 'a' && c <= 'z'; });
  }

 protected:
  Example draw(uint64_t& rng) const override {
    std::string s;
    for (int i = 0; i < length_; ++i) s += static_cast<char>('a' + below(rng, 26));
    return {"Q: reverse " + s + "\nA:", std::string(s.rbegin(), s.rend())};
  }

 private:
  int length_;
};

class Sort : public Task {
 public:
  explicit Sort(int length) : length_(length) {}
  std::string name() const override { return fmt::format("sort:{}", length_); }
  bool is_well_formed(std::string_view a) const override {
    for (size_t i = 0; i < a.size(); ++i)
      if (!(i % 2 == 0 ? is_digit(a[i]) : a[i] == ',')) return false;
    return a.size() % 2 == 1;
  }

 protected:
  Example draw(uint64_t& rng) const override {
    std::vector<int> v(static_cast<size_t>(length_));
    for (int& x : v) x = static_cast<int>(below(rng, 10));
    auto join = [](const std::vector<int>& xs) {
      std::string s;
      for (size_t i = 0; i < xs.size(); ++i) s += (i ? "," : "") + std::to_string(xs[i]);
      return s;
    };
    const std::string question = join(v);
    std::sort(v.begin(), v.end());
    return {"Q: sort " + question + "\nA:", join(v)};
  }

 private:
  int length_;
};

}  // namespace

Example Task::make(uint64_t seed, int64_t index, Split split) const {
  uint64_t rng = seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(index);
  splitmix64(rng);
  for (int tries = 0; tries < 10000; ++tries) {
    Example e = draw(rng);
    if (is_held_out(e) == (split == Split::kHeldOut)) return e;
  }
  throw_error<RequestError>("task {}: no {} example found", name(),
                            split == Split::kHeldOut ? "held-out" : "train");
}

std::unique_ptr<Task> make_task(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  int size = 0;
  if (colon != std::string::npos) {
    try {
      size = std::stoi(spec.substr(colon + 1));
    } catch (const std::exception&) {
      throw_error<RequestError>("--task {}: '{}' is not a number", spec, spec.substr(colon + 1));
    }
  }
  const bool has_size = colon != std::string::npos;
  const auto sized = [&](int fallback, int lo, int hi) {
    const int n = has_size ? size : fallback;
    if (n < lo || n > hi)
      throw_error<RequestError>("--task {}: size {} is outside [{}, {}]", spec, n, lo, hi);
    return n;
  };
  if (kind == "add") return std::make_unique<Arithmetic>('+', sized(2, 1, 9));
  if (kind == "mul") return std::make_unique<Arithmetic>('*', sized(2, 1, 9));
  if (kind == "reverse") return std::make_unique<Reverse>(sized(4, 1, 32));
  if (kind == "sort") return std::make_unique<Sort>(sized(4, 1, 16));
  throw_error<RequestError>("--task {}: unknown task (add[:D], mul[:D], reverse[:N], sort[:N])",
                            spec);
}

std::string extract_answer(std::string_view completion) {
  std::string_view line = completion.substr(0, completion.find('\n'));
  if (line.starts_with(' ')) line.remove_prefix(1);
  return std::string(line);
}

std::string sft_text(const Example& e) { return e.prompt + " " + e.answer + "\n"; }

}  // namespace lmstack::rl
