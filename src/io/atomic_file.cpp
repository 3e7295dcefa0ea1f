#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "trainstep/error.h"

namespace ts {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Writes all of [p, p+n), retrying short writes and EINTR. Returns errno or 0.
int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

}  // namespace

void write_file_atomic(const std::string& path, const void* data, size_t n) {
  write_file_atomic(path, std::vector<Chunk>{{data, n}});
}

void write_file_atomic(const std::string& path, const std::vector<Chunk>& chunks) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path + ": cannot write: " + errno_text(errno));

  // Any failure past this point must not leave the temp file behind.
  auto abort_with = [&](const char* what, int e) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    fail(path + ": " + what + ": " + errno_text(e));
  };
  for (const Chunk& c : chunks)
    if (int e = write_all(fd, static_cast<const char*>(c.first), c.second))
      abort_with("cannot write", e);
  if (::fsync(fd) != 0) abort_with("cannot fsync", errno);
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) abort_with("cannot write", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) abort_with("cannot rename temp file", errno);

  // Make the rename itself durable. Some filesystems refuse fsync on a
  // directory; the data is already safe, so only an open failure is fatal.
  std::string dir = dir_of(path);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail(path + ": cannot open directory for fsync: " + errno_text(errno));
  if (::fsync(dfd) != 0 && errno != EINVAL && errno != EROFS) {
    int e = errno;
    ::close(dfd);
    fail(path + ": cannot fsync directory: " + errno_text(e));
  }
  ::close(dfd);
}

FileReader::FileReader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == ENOENT) fail(path + ": no such file");
    fail(path + ": cannot read: " + errno_text(errno));
  }
  struct stat st {};
  int e = ::fstat(fd_, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
  if (e != 0) {
    ::close(fd_);
    fail(path + ": cannot read: " + errno_text(e));
  }
  size_ = st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0;
}

FileReader::~FileReader() { ::close(fd_); }

std::string FileReader::read_rest() {
  // The size at open time is only a hint (the file may change, /proc files
  // say 0): read until EOF in blocks.
  std::string out;
  out.reserve(size_);
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd_, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(path_ + ": cannot read: " + errno_text(errno));
    }
    if (r == 0) return out;
    out.append(buf, static_cast<size_t>(r));
  }
}

void FileReader::read(void* dst, size_t n) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t r = ::read(fd_, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(path_ + ": cannot read: " + errno_text(errno));
    }
    if (r == 0) fail(path_ + ": truncated (the file ended while it was read)");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

std::string read_file(const std::string& path) { return FileReader(path).read_rest(); }

}  // namespace ts
