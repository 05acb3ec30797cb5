#include "cli/job_files.h"

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

}  // namespace nano
