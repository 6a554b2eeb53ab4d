// Subcommand registry for the `lmstack` binary. Each cmd_<name>.cc registers itself with a
// static RegisterCommand object; main.cc builds the CLI11 app from the registry, so adding a
// subcommand touches one file. A command reports failure by throwing lmstack::Error (main
// prints it and exits 1) or by returning a non-zero code from its run function.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace lmstack::cli {

struct CommandSpec {
  std::string name;
  std::string description;
  std::string examples;  // shown at the end of --help, one example per line
  // Declares options on `app` and returns the function that runs the command once parsed.
  std::function<std::function<int()>(CLI::App& app)> setup;
};

std::vector<CommandSpec>& command_registry();

struct RegisterCommand {
  explicit RegisterCommand(CommandSpec spec) { command_registry().push_back(std::move(spec)); }
};

// --threads N (default: physical cores). Shared so every command spells it the same way.
void add_threads_option(CLI::App& app, int& threads);

}  // namespace lmstack::cli
