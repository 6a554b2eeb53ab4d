// Render-time state of the Jinja interpreter: the chain of variable scopes (root = the
// caller's context, one child per for-loop iteration and per macro call, as jinja2 scopes
// them), the location being evaluated (for error messages), and the built-in functions,
// filters, tests and methods. A Context belongs to one render() call and one thread.
#pragma once

#include <string>
#include <unordered_map>

#include "lmstack/tokenizer/jinja_ast.h"
#include "lmstack/tokenizer/jinja_value.h"

namespace lmstack::tokenizer::jinja {

class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}
  // The innermost binding of `name`, or nullptr.
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value) { vars_[name] = std::move(value); }

 private:
  const Scope* parent_;
  std::unordered_map<std::string, Value> vars_;
};

class Context {
 public:
  explicit Context(Scope* root) : scope(root), root_scope(root) {}

  // A variable, then a global function; else Undefined naming it.
  Value lookup(const std::string& name) const;
  // Records where evaluation is, so an error thrown below can name it.
  void at(Location l) { loc = l; }

  // Counts one loop iteration or macro call; fails past kMaxSteps (nested range() loops ran
  // until killed, issue 13).
  void step();
  // Counts the bytes of a string or list an expression produced; fails past kMaxWorkBytes, so
  // a loop of big concatenations or joins ends in a bounded time.
  void charge(const Value& produced);
  // Fails when rendering has used more than kMaxStackBytes of the stack since the Context was
  // made: macro recursion (kMaxCallDepth) times statement and expression nesting (the
  // parser's kMaxNesting each) could otherwise exceed a thread's stack in sanitizer builds.
  void check_stack() const;

  Scope* scope;
  Scope* root_scope;
  Location loc;
  int call_depth = 0;  // macro recursion, bounded by kMaxCallDepth
  int64_t steps = 0;
  size_t work_bytes = 0;
  const char* stack_base = static_cast<const char*>(__builtin_frame_address(0));
  // Limits (docs/reliability.md): generous for every real template. A chat render takes 1-3
  // steps per message, so 200,000 steps allow far more messages than any context holds.
  static constexpr int kMaxCallDepth = 64;
  static constexpr size_t kMaxOutputBytes = kMaxStringBytes;
  static constexpr int64_t kMaxSteps = 200'000;
  static constexpr size_t kMaxWorkBytes = size_t{4} << 30;
  static constexpr size_t kMaxStackBytes = size_t{2} << 20;
};

// Built-ins (jinja_filters.cc, jinja_builtins.cc). find_* return nullptr for unknown names,
// which the parser reports as unsupported constructs.
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);
const Value* find_global(const std::string& name);
// obj.name(args) for str, dict and list methods; throws RenderError naming unknown ones.
Value call_method(Context& ctx, const Value& obj, const std::string& name, const CallArgs& args);
// True if `name` is a method call_method supports on obj's type (so obj.name is a method).
bool has_method(const Value& obj, const std::string& name);

// Reads positional/keyword arguments against a Python-style signature, e.g.
// ArgReader a(args, "tojson", {"indent", "ensure_ascii"}); a.get(0) is the indent or
// Undefined when not given. Extra or unknown arguments throw.
class ArgReader {
 public:
  ArgReader(const CallArgs& args, const char* what, std::vector<std::string> params);
  const Value& get(size_t index) const { return values_[index]; }
  bool has(size_t index) const { return !values_[index].is_undefined(); }

 private:
  std::vector<Value> values_;
};

}  // namespace lmstack::tokenizer::jinja
