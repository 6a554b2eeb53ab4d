// The `lmstack` command: builds the CLI from the registered subcommands (command.h) and is
// the top-level error boundary: an lmstack::Error prints "lmstack: error: ..." and exits 1.
// Under mpirun the error instead goes through dist::abort_all, which names the rank and ends
// every other rank at once (they would otherwise wait forever in their next collective).
#include <algorithm>
#include <cstdio>
#include <memory>

#include "lmstack/cli/command.h"
#include "lmstack/core/error.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/dist/comm.h"

namespace lmstack::cli {

std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> commands;
  return commands;
}

void add_threads_option(CLI::App& app, int& threads) {
  threads = ThreadPool::default_num_threads();
  app.add_option("-t,--threads", threads, "worker threads (default: physical cores)")
      ->check(CLI::Range(1, 1024));
}

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "lmstack: tokenize, run, quantize, train and serve transformer LMs; calc derives "
      "every number and checks it against measurements"};
  app.set_version_flag("--version", std::string("lmstack ") + LMSTACK_VERSION);
  app.require_subcommand(1);
  auto& commands = command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const CommandSpec& a, const CommandSpec& b) { return a.name < b.name; });
  std::vector<std::function<int()>> runners(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    CLI::App* sub = app.add_subcommand(commands[i].name, commands[i].description);
    if (!commands[i].examples.empty()) sub->footer("Examples:\n" + commands[i].examples);
    runners[i] = commands[i].setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (size_t i = 0; i < commands.size(); ++i)
    if (app.got_subcommand(commands[i].name)) return runners[i]();
  return 0;
}

}  // namespace
}  // namespace lmstack::cli

namespace {

int fail(const std::string& message, int code) {
  if (lmstack::dist::launched_by_mpi()) lmstack::dist::abort_all(message, code);
  std::fprintf(stderr, "lmstack: %s\n", message.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return lmstack::cli::run(argc, argv);
  } catch (const lmstack::Error& e) {
    return fail(std::string("error: ") + e.what(), 1);
  } catch (const std::bad_alloc&) {
    return fail("error: out of memory", 1);
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what(), 2);
  }
}
