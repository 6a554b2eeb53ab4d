// All of lmstack's file I/O goes through here, so tests can inject faults (leveldb's Env):
// set_file_fault_hook() makes reads or writes of chosen paths fail or come back truncated.
// Errors throw IoError naming the path and the OS reason.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lmstack {

// Reads a whole file. Throws IoError if it cannot be opened or read, or is a directory.
std::string read_file(const std::string& path);
// Writes a whole file atomically: to "<path>.tmp", fsync, then rename over `path`, so a crash
// never leaves a half-written file under the real name.
void write_file_atomic(const std::string& path, std::string_view contents);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);
// Creates the directory and its parents; throws IoError on failure.
void make_directories(const std::string& path);
// Joins with exactly one '/'.
std::string path_join(const std::string& a, const std::string& b);

// Fault injection for tests. The hook sees each operation ("read" or "write") and path, and
// returns: -1 to let it proceed, -2 to fail it with IoError, or n >= 0 to truncate the data
// read or written to its first n bytes. nullptr removes the hook. Not thread-safe to change
// while I/O runs.
using FileFaultHook = std::function<int64_t(std::string_view op, const std::string& path)>;
void set_file_fault_hook(FileFaultHook hook);

}  // namespace lmstack
