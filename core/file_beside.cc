#include "core/file_beside.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>

#include <nano/error.h>

namespace nano {

void write_file_beside(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp-XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) throw Error("cannot write " + path + ": " + strerror(errno));
  std::string why;
  for (size_t done = 0; why.empty() && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      why = n < 0 ? strerror(errno) : "short write";
    else
      done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && why.empty()) why = strerror(errno);
  if (why.empty() && std::rename(temporary.c_str(), path.c_str()) != 0) why = strerror(errno);
  if (!why.empty()) {
    std::remove(temporary.c_str());
    throw Error("cannot write " + path + ": " + why);
  }
}

}  // namespace nano
