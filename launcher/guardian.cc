#include "launcher/guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nano/error.h>
#include "launcher/frames.h"

namespace nano {
namespace {

// What the guardian holds: fixed tables, filled from its pipe (no allocation after fork).
constexpr int kMaxGroups = 8192;
constexpr int kMaxPaths = 64;
constexpr int kMaxPath = 4096;

struct Table {
  pid_t groups[kMaxGroups];
  int ngroups;
  char paths[kMaxPaths][kMaxPath];  // "p<path>" or "x<dir>\t<prefix>"
  int npaths;
};

struct LinuxDirent64 {
  unsigned long long d_ino;
  long long d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

size_t length(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

bool starts_with(const char* s, const char* prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return false;
  return true;
}

// Removes the entries of directory `fd` whose names start with `prefix` ("" = all), whole
// trees for subdirectories, then closes `fd`; depth-limited.
bool remove_entries(int fd, const char* prefix, int depth) {
  if (depth > 32) {
    close(fd);
    return false;
  }
  bool ok = true;
  char buf[8192];
  for (;;) {
    long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buf + off);
      off += d->d_reclen;
      const char* name = d->d_name;
      if ((name[0] == '.' && name[1] == 0) || (name[0] == '.' && name[1] == '.' && name[2] == 0)) continue;
      if (!starts_with(name, prefix)) continue;
      if (unlinkat(fd, name, 0) == 0) continue;
      if (errno != EISDIR && errno != EPERM) {
        ok = ok && errno == ENOENT;
        continue;
      }
      int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        ok = false;
        continue;
      }
      ok = remove_entries(sub, "", depth + 1) && ok;
      ok = (unlinkat(fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) && ok;
    }
  }
  close(fd);
  return ok;
}

[[noreturn]] void guardian_main(int in, Table* t) {
  // Read commands until the launcher's end closes the pipe.
  char line[kMaxPath + 2];
  size_t used = 0;
  bool dismissed = false;
  char chunk[4096];
  for (;;) {
    ssize_t n = read(in, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (chunk[i] != '\n') {
        if (used < sizeof line - 1) line[used++] = chunk[i];
        continue;
      }
      line[used] = 0;
      used = 0;
      if (line[0] == 'd') {
        dismissed = true;
      } else if (line[0] == 'g' && t->ngroups < kMaxGroups) {
        long pgid = 0;
        for (const char* p = line + 1; *p >= '0' && *p <= '9'; ++p) pgid = pgid * 10 + (*p - '0');
        if (pgid > 1) t->groups[t->ngroups++] = static_cast<pid_t>(pgid);
      } else if ((line[0] == 'p' || line[0] == 'x') && t->npaths < kMaxPaths) {
        memcpy(t->paths[t->npaths++], line, length(line) + 1);
      }
    }
  }
  if (!dismissed) {
    for (int i = 0; i < t->ngroups; ++i) kill(-t->groups[i], SIGKILL);
    for (int i = 0; i < t->npaths; ++i) {
      char* entry = t->paths[i];
      if (entry[0] == 'p') {
        remove_tree(entry + 1);
      } else {
        char* tab = entry + 1;
        while (*tab && *tab != '\t') ++tab;
        if (!*tab) continue;
        *tab = 0;
        remove_with_prefix(entry + 1, tab + 1);
      }
    }
  }
  _exit(0);
}

}  // namespace

bool remove_tree(const char* path) {
  if (unlink(path) == 0 || errno == ENOENT) return true;
  if (errno != EISDIR && errno != EPERM) return false;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  bool ok = remove_entries(fd, "", 0);
  return (rmdir(path) == 0 || errno == ENOENT) && ok;
}

bool remove_with_prefix(const char* dir, const char* prefix) {
  if (!*prefix) return false;  // never everything
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  return remove_entries(fd, prefix, 0);
}

Guardian::Guardian() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("guardian: pipe: ") + strerror(errno));
  // The tables are allocated before fork: the child must not allocate.
  Table* table = new Table();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    delete table;
    throw Error(std::string("guardian: fork: ") + strerror(err));
  }
  if (pid == 0) {
    setpgid(0, 0);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) signal(sig, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Only the read end stays: no inherited socket, pipe or terminal is held open by us.
    int in = fcntl(fds[0], F_DUPFD, 3);
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      dup2(null_fd, 0);
      dup2(null_fd, 1);
      dup2(null_fd, 2);
    }
    if (in != 3) {
      dup2(in, 3);
      in = 3;
    }
    if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0) {
      for (int fd = 4; fd < 65536; ++fd) close(fd);
    }
    guardian_main(in, table);
  }
  delete table;
  close(fds[0]);
  pid_ = pid;
  fd_ = fds[1];
}

Guardian::~Guardian() {
  dismiss();
  if (pid_ > 0) {
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void Guardian::send(char kind, const std::string& value) {
  if (fd_ < 0) return;
  std::string line(1, kind);
  line += value;
  line += '\n';
  write_all(fd_, line);  // a guardian gone is seen by its absence, not here
}

void Guardian::watch_group(pid_t pgid) { send('g', std::to_string(pgid)); }
void Guardian::remove_path(const std::string& path) {
  if (!path.empty() && path.size() < static_cast<size_t>(kMaxPath) - 1) send('p', path);
}
void Guardian::remove_prefix(const std::string& dir, const std::string& prefix) {
  if (!prefix.empty() && dir.size() + prefix.size() < static_cast<size_t>(kMaxPath) - 2) send('x', dir + "\t" + prefix);
}

void Guardian::dismiss() {
  if (fd_ < 0) return;
  send('d', "");
  close(fd_);
  fd_ = -1;
}

}  // namespace nano
