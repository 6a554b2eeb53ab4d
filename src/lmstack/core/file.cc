// File I/O with fault injection (see file.h).
#include "lmstack/core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lmstack/core/error.h"

namespace lmstack {
namespace {

FileFaultHook& hook() {
  static FileFaultHook h;
  return h;
}

int64_t fault(std::string_view op, const std::string& path) {
  return hook() ? hook()(op, path) : -1;
}

}  // namespace

void set_file_fault_hook(FileFaultHook h) { hook() = std::move(h); }

std::string read_file(const std::string& path) {
  const int64_t f = fault("read", path);
  if (f == -2) throw_error<IoError>("{}: read failed (injected fault)", path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))  // an ifstream would read it as empty text
    throw_error<IoError>("{}: is a directory, not a file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error<IoError>("{}: cannot open for reading: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw_error<IoError>("{}: read error", path);
  std::string s = ss.str();
  if (f >= 0 && static_cast<size_t>(f) < s.size()) s.resize(static_cast<size_t>(f));
  return s;
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  const int64_t f = fault("write", path);
  if (f == -2) throw_error<IoError>("{}: write failed (injected fault)", path);
  if (f >= 0 && static_cast<size_t>(f) < contents.size())
    contents = contents.substr(0, static_cast<size_t>(f));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_error<IoError>("{}: cannot create: {}", tmp, std::strerror(errno));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw_error<IoError>("{}: write failed: {}", tmp, std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    throw_error<IoError>("{}: fsync/close failed: {}", tmp, std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw_error<IoError>("{}: rename to {} failed: {}", tmp, path, std::strerror(errno));
  if (f >= 0) throw_error<IoError>("{}: write truncated (injected fault)", path);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void make_directories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw_error<IoError>("{}: cannot create directory: {}", path, ec.message());
}

std::string path_join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

}  // namespace lmstack
