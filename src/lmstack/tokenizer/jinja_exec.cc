// Statement execution for the Jinja interpreter (see jinja_ast.h). Scoping follows jinja2:
// `set` at top level or inside `if` binds in the current scope; each for-loop iteration and
// each macro call gets a fresh child scope, so assignments there do not leak out (which is
// why templates use namespace() to carry state out of loops).
#include <fmt/format.h>

#include "lmstack/tokenizer/jinja_context.h"
#include "lmstack/tokenizer/jinja_eval.h"

namespace lmstack::tokenizer::jinja {
namespace {

// Makes `scope` current for its lifetime.
class ScopeGuard {
 public:
  ScopeGuard(Context& ctx, Scope* scope) : ctx_(ctx), saved_(ctx.scope) { ctx.scope = scope; }
  ~ScopeGuard() { ctx_.scope = saved_; }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Context& ctx_;
  Scope* saved_;
};

// Fails when `v`, about to be stored in a namespace, is or holds a namespace.
void check_namespace_value(const Value& target, const std::string& name, const Value& v) {
  if (!v.has_namespace()) return;
  const bool self = v.is_namespace() && &v.as_namespace() == &target.as_namespace();
  fail(fmt::format("cannot assign {} to '{}': a namespace may not hold a namespace{}",
                   self ? "the namespace itself" : "a namespace (or a list or dict holding one)",
                   name, self ? " (it would contain itself)" : ", which could contain itself"));
}

void check_output_size(const std::string& out) {
  if (out.size() > Context::kMaxOutputBytes)
    fail(fmt::format("rendered output exceeds {} bytes (kMaxOutputBytes)",
                     Context::kMaxOutputBytes));
}

// Binds `targets` to `value`: one name takes it whole, several unpack a sequence.
void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    scope.set(targets[0], value);
    return;
  }
  const ValueList items = iterate(value);
  if (items.size() != targets.size())
    fail(fmt::format("{} values to unpack (expected {}, got {})",
                     items.size() > targets.size() ? "too many" : "not enough", targets.size(),
                     items.size()));
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}

// The `loop` variable of iteration i of n.
Value make_loop(const ValueList& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto index0 = static_cast<int64_t>(i);
  auto loop = std::make_shared<Dict>();
  loop->set("index0", Value::integer(index0));
  loop->set("index", Value::integer(index0 + 1));
  loop->set("revindex0", Value::integer(n - index0 - 1));
  loop->set("revindex", Value::integer(n - index0));
  loop->set("first", Value::boolean(i == 0));
  loop->set("last", Value::boolean(index0 == n - 1));
  loop->set("length", Value::integer(n));
  loop->set("depth", Value::integer(1));
  loop->set("depth0", Value::integer(0));
  if (i > 0) loop->set("previtem", items[i - 1]);
  if (index0 + 1 < n) loop->set("nextitem", items[i + 1]);
  loop->set("cycle", Value::callable("cycle", [index0](Context&, const CallArgs& args) {
              if (args.positional.empty()) fail("no items for cycling given");
              return args.positional[static_cast<size_t>(index0) % args.positional.size()];
            }));
  return Value::dict(std::move(loop));
}

}  // namespace

void Context::step() {
  if (++steps > kMaxSteps)
    fail(fmt::format("the template ran more than {} loop iterations and macro calls (kMaxSteps)",
                     kMaxSteps));
}

void Context::charge(const Value& produced) {
  if (produced.is_string())
    work_bytes += produced.as_string().size();
  else if (produced.is_list())
    work_bytes += produced.as_list().size() * sizeof(Value);
  if (work_bytes > kMaxWorkBytes)
    fail(fmt::format("the template built more than {} bytes of strings and lists (kMaxWorkBytes)",
                     kMaxWorkBytes));
}

void Context::check_stack() const {
  const auto* here = static_cast<const char*>(__builtin_frame_address(0));
  if (here<stack_base&& static_cast<size_t>(stack_base - here)> kMaxStackBytes)
    fail(fmt::format("the template recursed through more than {} bytes of stack (kMaxStackBytes)",
                     kMaxStackBytes));
}

Flow exec_body(const Body& body, Context& ctx, std::string& out) {
  ctx.check_stack();
  for (const auto& stmt : body) {
    const Flow flow = stmt->exec(ctx, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Flow TextStmt::exec(Context&, std::string& out) const {
  out += text;
  check_output_size(out);
  return Flow::kNormal;
}

Flow OutputStmt::exec(Context& ctx, std::string& out) const {
  out += expr->eval(ctx).str();
  check_output_size(out);
  return Flow::kNormal;
}

Flow IfStmt::exec(Context& ctx, std::string& out) const {
  for (const auto& [cond, body] : branches)
    if (cond->eval(ctx).truthy()) return exec_body(body, ctx, out);
  return exec_body(else_body, ctx, out);
}

Flow ForStmt::exec(Context& ctx, std::string& out) const {
  const Value seq = iterable->eval(ctx);
  ctx.at(loc);
  ValueList items = iterate(seq);
  if (filter) {  // `for x in xs if cond`: loop.* counts only the items that pass
    ValueList kept;
    for (const Value& item : items) {
      ctx.step();
      Scope probe(ctx.scope);
      bind_targets(probe, targets, item);
      ScopeGuard guard(ctx, &probe);
      if (filter->eval(ctx).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(else_body, ctx, out);
  for (size_t i = 0; i < items.size(); ++i) {
    Scope iteration(ctx.scope);
    ctx.at(loc);
    ctx.step();
    bind_targets(iteration, targets, items[i]);
    iteration.set("loop", make_loop(items, i));
    ScopeGuard guard(ctx, &iteration);
    if (exec_body(body, ctx, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Flow SetStmt::exec(Context& ctx, std::string&) const {
  Value v = value->eval(ctx);
  ctx.at(loc);
  if (attr.empty()) {
    bind_targets(*ctx.scope, targets, v);
    return Flow::kNormal;
  }
  const Value target = ctx.lookup(targets[0]);
  if (!target.is_namespace())
    fail(fmt::format("cannot assign attribute '{}' on '{}': only namespace() objects allow it",
                     attr, targets[0]));
  check_namespace_value(target, targets[0] + "." + attr, v);
  target.as_namespace().set(attr, std::move(v));
  return Flow::kNormal;
}

Flow SetBlockStmt::exec(Context& ctx, std::string&) const {
  std::string captured;
  exec_body(body, ctx, captured);
  ctx.scope->set(name, Value::string(std::move(captured)));
  return Flow::kNormal;
}

Flow MacroStmt::exec(Context& ctx, std::string&) const {
  const MacroStmt* macro = this;
  ctx.scope->set(name, Value::callable(name, [macro](Context& c, const CallArgs& args) {
                   c.at(macro->loc);
                   if (args.positional.size() > macro->params.size())
                     fail(fmt::format("macro '{}' takes not more than {} argument(s)", macro->name,
                                      macro->params.size()));
                   // Macros resolve free names in the template's top-level scope, at call time.
                   Scope call_scope(c.root_scope);
                   ScopeGuard guard(c, &call_scope);
                   for (size_t i = 0; i < macro->params.size(); ++i) {
                     const auto& [param, fallback] = macro->params[i];
                     if (i < args.positional.size()) {
                       call_scope.set(param, args.positional[i]);
                     } else if (fallback) {
                       call_scope.set(param, fallback->eval(c));
                     } else {
                       call_scope.set(param,
                                      Value::undefined(fmt::format("'{}' is undefined", param)));
                     }
                   }
                   for (const auto& [key, v] : args.keyword) {
                     bool known = false;
                     for (const auto& param : macro->params) known = known || param.first == key;
                     if (!known)
                       fail(fmt::format("macro '{}' got an unexpected keyword argument '{}'",
                                        macro->name, key));
                     call_scope.set(key, v);
                   }
                   c.step();
                   if (++c.call_depth > Context::kMaxCallDepth)
                     fail(fmt::format("macro '{}': recursion deeper than {}", macro->name,
                                      Context::kMaxCallDepth));
                   std::string rendered;
                   exec_body(macro->body, c, rendered);
                   --c.call_depth;
                   return Value::string(std::move(rendered));
                 }));
  return Flow::kNormal;
}

Flow LoopControlStmt::exec(Context&, std::string&) const { return flow; }

Flow FilterBlockStmt::exec(Context& ctx, std::string& out) const {
  std::string captured;
  exec_body(body, ctx, captured);
  const CallArgs call_args = args.eval(ctx);
  ctx.at(loc);
  out += fn(ctx, Value::string(std::move(captured)), call_args).str();
  check_output_size(out);
  return Flow::kNormal;
}

Flow BlockStmt::exec(Context& ctx, std::string& out) const { return exec_body(body, ctx, out); }

}  // namespace lmstack::tokenizer::jinja
