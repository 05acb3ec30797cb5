#include "launcher/job_files.h"

#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include <random>

namespace nano {

std::string make_job_id() {
  std::random_device rd;
  char text[16];
  snprintf(text, sizeof text, "%06x", rd() & 0xffffff);
  return std::to_string(getpid()) + "-" + text;
}

std::string job_shm_prefix(const std::string& job_id) { return "nano-" + job_id + "-"; }

std::string job_dir_of(const std::string& job_id) { return "/dev/shm/nano-" + job_id; }

std::string hosts_session_dir_of(const std::string& job_id) { return "/tmp/nano-" + job_id; }

std::string shim_marker_of(const std::string& session_dir, int rank) {
  return session_dir + "/nano-shim-" + std::to_string(rank);
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
