#include "runtime/training/durable_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>

#include <nano/error.h>
#include "core/job_secret.h"

namespace nano {

namespace {

std::string errno_text() { return strerror(errno); }

}  // namespace

void write_durable(const std::string& dir, const std::string& path, const std::string& bytes) {
  // Unpredictable and made here (O_EXCL, never through a link): nobody else can have it open.
  const std::string tmp = dir + "/.tmp-" + hex_of(make_challenge()) + "-" + path.substr(path.rfind('/') + 1);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw Error("nano: cannot write checkpoint " + path + ": " + errno_text());
  const char* p = bytes.data();
  size_t left = bytes.size();
  std::string failure;
  while (left > 0 && failure.empty()) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      failure = n < 0 ? errno_text() : "short write";
    else {
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  if (failure.empty() && fsync(fd) != 0) failure = errno_text();
  if (close(fd) != 0 && failure.empty()) failure = errno_text();
  if (failure.empty() && rename(tmp.c_str(), path.c_str()) != 0) failure = errno_text();
  if (!failure.empty()) {
    unlink(tmp.c_str());
    throw Error("nano: cannot write checkpoint " + path + ": " + failure);
  }
  sync_folder(dir);
}

void sync_folder(const std::string& dir) {
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

}  // namespace nano
