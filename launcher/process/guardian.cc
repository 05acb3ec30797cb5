#include "launcher/process/guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nano/error.h>

namespace nano {
namespace {

// What the guardian holds: fixed tables, filled from its socket (no allocation after fork).
constexpr int kMaxGroups = 8192;
constexpr int kMaxPaths = 64;
constexpr int kMaxPath = 4096;

struct WatchedGroup {
  GroupLeader leader;
  int pidfd;  // the leader's, handed over by the launcher; -1 = none (its start time decides)
};

struct Table {
  WatchedGroup groups[kMaxGroups];
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

// Reads a decimal number at `*p`, moving `*p` past it.
unsigned long long number_at(const char** p) {
  unsigned long long value = 0;
  for (; **p >= '0' && **p <= '9'; ++*p) value = value * 10 + static_cast<unsigned long long>(**p - '0');
  return value;
}

// Takes one message of the launcher: "g<pid> <start time>" (with the leader's pidfd attached, or
// none), "f<pid>", "p<path>", "x<dir>\t<prefix>" or "d". Returns the attached pidfd if it was not
// kept.
int take_message(Table* t, const char* message, int passed, bool* dismissed) {
  const char* p = message + 1;
  if (message[0] == 'd') {
    *dismissed = true;
  } else if (message[0] == 'g' && t->ngroups < kMaxGroups) {
    const auto pid = static_cast<pid_t>(number_at(&p));
    if (*p == ' ') ++p;
    const unsigned long long start = number_at(&p);
    if (pid > 1) {
      t->groups[t->ngroups++] = {{pid, start}, passed};
      return -1;
    }
  } else if (message[0] == 'f') {
    const auto pid = static_cast<pid_t>(number_at(&p));
    for (int i = 0; i < t->ngroups; ++i) {
      if (t->groups[i].leader.pid != pid) continue;
      if (t->groups[i].pidfd >= 0) close(t->groups[i].pidfd);
      t->groups[i] = t->groups[--t->ngroups];
      break;
    }
  } else if ((message[0] == 'p' || message[0] == 'x') && t->npaths < kMaxPaths) {
    const size_t size = length(message);
    if (size < static_cast<size_t>(kMaxPath)) memcpy(t->paths[t->npaths++], message, size + 1);
  }
  return passed;
}

[[noreturn]] void guardian_main(int in, Table* t) {
  // Read messages until the launcher's end closes the socket.
  char message[kMaxPath + 64];
  union {
    cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  bool dismissed = false;
  for (;;) {
    iovec iov{message, sizeof message - 1};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.bytes;
    m.msg_controllen = sizeof control.bytes;
    const ssize_t n = recvmsg(in, &m, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    message[n] = 0;
    int passed = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&passed, CMSG_DATA(c), sizeof passed);
    passed = take_message(t, message, passed, &dismissed);
    if (passed >= 0) close(passed);
  }
  if (!dismissed) {
    // A group whose leader was reaped and whose number went to another process is left alone.
    for (int i = 0; i < t->ngroups; ++i) signal_group_of(t->groups[i].leader, t->groups[i].pidfd, SIGKILL);
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
  // A socket, not a pipe: the leaders' pidfds travel over it (SCM_RIGHTS), one message each.
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(std::string("guardian: socketpair: ") + strerror(errno));
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
    // Only our end stays: no inherited socket, pipe or terminal is held open by us.
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

void Guardian::send(char kind, const std::string& value, int pass_fd) {
  if (fd_ < 0) return;
  std::string message(1, kind);
  message += value;
  iovec iov{message.data(), message.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  union {
    cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control{};
  if (pass_fd >= 0) {
    m.msg_control = control.bytes;
    m.msg_controllen = sizeof control.bytes;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass_fd, sizeof pass_fd);
  }
  // A guardian gone is seen by its absence, not here (MSG_NOSIGNAL: no SIGPIPE either).
  while (sendmsg(fd_, &m, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

void Guardian::watch_group(const GroupLeader& leader, int pidfd) {
  send('g', std::to_string(leader.pid) + " " + std::to_string(leader.start_time), pidfd);
}
void Guardian::forget_group(pid_t pgid) { send('f', std::to_string(pgid)); }
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
