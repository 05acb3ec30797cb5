#include "launcher/prepare/job_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <random>

#include <nano/error.h>

namespace nano {

std::string make_job_id() {
  // 64 bits from the kernel: the name of the job's files is no guess for another user.
  std::random_device rd;
  const unsigned long long high = rd(), low = rd();
  char text[24];
  snprintf(text, sizeof text, "%08llx%08llx", high & 0xffffffffULL, low & 0xffffffffULL);
  return std::to_string(getpid()) + "-" + text;
}

std::string job_shm_prefix(const std::string& job_id) { return "nano-" + job_id + "-"; }

std::string job_dir_of(const std::string& job_id) { return "/dev/shm/nano-" + job_id; }

std::string hosts_session_dir_of(const std::string& job_id) { return "/tmp/nano-" + job_id; }

std::string shim_marker_of(const std::string& session_dir, int rank) {
  return session_dir + "/nano-shim-" + std::to_string(rank);
}

std::string private_folder_problem(const struct stat& st, uid_t uid) {
  if (S_ISLNK(st.st_mode)) return "is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "is not a folder";
  if (st.st_uid != uid) return "belongs to uid " + std::to_string(st.st_uid);
  if ((st.st_mode & 07777) != 0700) {
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("has mode ") + mode;
  }
  return "";
}

void make_private_folder(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) == 0) return;
  // Whatever is there, a folder of another user or of ours, a link, was not made by this job.
  if (errno == EEXIST) throw UsageError(dir + " already exists and was not made by this job: refusing to use it");
  throw Error("cannot create " + dir + ": " + strerror(errno));
}

void join_private_folder(const std::string& dir, const std::string& host) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error("cannot create " + dir + " on " + host + ": " + strerror(errno));
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) throw Error("cannot look at " + dir + " on " + host + ": " + strerror(errno));
  const std::string problem = private_folder_problem(st, geteuid());
  if (!problem.empty()) throw Error(dir + " on " + host + " " + problem + ": refusing to use it");
}

int create_private_file(const std::string& path) {
  return open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

bool has_entry_with_prefix(const std::string& dir, const std::string& prefix) {
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d))
    if (std::string(e->d_name).rfind(prefix, 0) == 0) found = true;
  closedir(d);
  return found;
}

}  // namespace nano
