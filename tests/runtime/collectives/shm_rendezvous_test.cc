// Shared memory as the ranks of one host meet in it (runtime/collectives/shm_rendezvous.h): what
// is read from the store is bounded, another user's object is refused, the size setting checked.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <nano/error.h>
#include "runtime/collectives/shm_collectives.h"
#include "runtime/collectives/shm_rendezvous.h"

// c10's logging defines a fatal CHECK; doctest's must win, so it comes last.
#undef CHECK
#include <doctest/doctest.h>

TEST_CASE("shared memory: what rank 0 publishes is bounded before use") {
  struct Row {
    const char* text;
    bool ok;
    const char* name;
    std::size_t bytes;
  };
  const Row rows[] = {
      {"/nano-job-1-0\n1048576", true, "/nano-job-1-0", 1048576},
      {"\n0", true, "", 0},                                              // rank 0 could not make one
      {"/nano-x\n1125899906842624", true, "/nano-x", 1125899906842624},  // 1 PiB
      {"/nano-x\n1125899906842688", false, "", 0},                       // over 1 PiB
      {"/nano-x\n100", false, "", 0},                                    // not a multiple of 64
      {"/nano-x\n-64", false, "", 0},
      {"/nano-x\n18446744073709551616", false, "", 0},
      {"/nano-x", false, "", 0},          // no size
      {"/etc/passwd\n64", false, "", 0},  // not a name of nano's
      {"/nano-../../x\n64", false, "", 0},
      {"someone\n64", false, "", 0},
  };
  for (const Row& r : rows) {
    CAPTURE(r.text);
    const auto area = nano::parse_shared_area(r.text);
    REQUIRE(area.has_value() == r.ok);
    if (!area) continue;
    CHECK(area->name == r.name);
    CHECK(area->data_bytes == r.bytes);
  }
  CHECK_FALSE(nano::parse_shared_area(std::string(300, 'x') + "\n64"));
}

TEST_CASE("shared memory: an object another user made is never mapped") {
  if (getuid() != 0) return;  // making another user's object needs root
  const std::string name = "/nano-context-test-" + std::to_string(getpid());
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);  // nobody plants it, open to all
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
    _exit(fd >= 0 && fchmod(fd, 0666) == 0 && ftruncate(fd, 4096) == 0 ? 0 : 3);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK_THROWS_WITH_AS(
      nano::SharedMemory::open(name, 4096),
      ("nano: shared memory " + name + " is not this user's private object: refusing to map it").c_str(), nano::Error);
  // Made first under the name rank 0 would make: refused as taken (the job stops), not a full
  // /dev/shm (after which a job goes on over TCP).
  CHECK_THROWS_WITH_AS(nano::SharedMemory::create(name, 4096),
                       ("nano: shared memory " + name + " was made by someone else first: refusing it").c_str(),
                       nano::SharedMemoryTaken);
  shm_unlink(name.c_str());
}

TEST_CASE("shared memory: NANO_SHM_BYTES is 0 or a byte count from 64 to 1 PiB, else one line naming it") {
  struct Row {
    const char* text;
    long long bytes;  // -1: refused
  };
  const Row rows[] = {{"0", 0},
                      {"64", 64},
                      {"1048576", 1048576},
                      {"1125899906842624", 1125899906842624},
                      {"32", -1},
                      {"63", -1},
                      {"1125899906842625", -1},
                      {"99999999999999999999", -1},
                      {"-64", -1},
                      {"", -1},
                      {"4k", -1}};
  for (const Row& r : rows) {
    CAPTURE(r.text);
    setenv("NANO_SHM_BYTES", r.text, 1);
    if (r.bytes >= 0) {
      CHECK(nano::shm_bytes_from_environment() == static_cast<std::size_t>(r.bytes));
    } else {
      CHECK_THROWS_WITH_AS(nano::shm_bytes_from_environment(),
                           (std::string("nano: bad NANO_SHM_BYTES='") + r.text +
                            "': expected 0 or a byte count from 64 to 1125899906842624")
                               .c_str(),
                           nano::UsageError);
    }
  }
  unsetenv("NANO_SHM_BYTES");
  CHECK(nano::shm_bytes_from_environment() == nano::ShmCollectives::kDefaultAreaBytes);
}
