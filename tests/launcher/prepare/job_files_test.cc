// A job's files are its own (launcher/prepare/job_files.h): its folders are made 0700 by the job, one
// that someone else made first is refused with a line naming it, and its files are made 0600,
// never through an existing file or a link.
#include "launcher/prepare/job_files.h"

#include <doctest/doctest.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <nano/error.h>
#include "launcher/process/guardian.h"

using namespace nano;

namespace {

struct stat made(mode_t mode, uid_t uid) {
  struct stat st {};
  st.st_mode = mode;
  st.st_uid = uid;
  return st;
}

std::string temp_folder() {
  char pattern[] = "/tmp/nano_job_files_test_XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  return pattern;
}

}  // namespace

TEST_CASE("private_folder_problem: a folder, not a link, of this user, mode 0700") {
  struct Row {
    struct stat st;
    std::string problem;
  };
  const std::vector<Row> table = {
      {made(S_IFDIR | 0700, 1000), ""},
      {made(S_IFDIR | 0755, 1000), "has mode 0755"},
      {made(S_IFDIR | 01777, 1000), "has mode 1777"},
      {made(S_IFDIR | 0770, 1000), "has mode 0770"},
      {made(S_IFDIR | 0700, 1001), "belongs to uid 1001"},
      {made(S_IFLNK | 0777, 1000), "is a symbolic link"},
      {made(S_IFREG | 0700, 1000), "is not a folder"},
  };
  for (const Row& row : table) {
    CAPTURE(row.problem);
    CHECK(private_folder_problem(row.st, 1000) == row.problem);
  }
}

TEST_CASE("make_private_folder: made 0700 by this job; one that exists already is refused, naming it") {
  const std::string base = temp_folder();
  const std::string dir = base + "/nano-1-00ff";
  make_private_folder(dir);
  struct stat st {};
  REQUIRE(lstat(dir.c_str(), &st) == 0);
  CHECK(private_folder_problem(st, geteuid()) == "");
  // Made first by someone else (here: by us, before): never used, whoever made it.
  CHECK_THROWS_WITH_AS(make_private_folder(dir),
                       (dir + " already exists and was not made by this job: refusing to use it").c_str(), UsageError);
  const std::string link = base + "/nano-1-link";
  REQUIRE(symlink(dir.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH_AS(make_private_folder(link),
                       (link + " already exists and was not made by this job: refusing to use it").c_str(), UsageError);
  CHECK_THROWS_WITH_AS(make_private_folder(base + "/missing/nano-1"),
                       ("cannot create " + base + "/missing/nano-1: No such file or directory").c_str(), Error);
  remove_tree(base.c_str());
}

TEST_CASE("join_private_folder: made when missing, else only this user's 0700 folder; a line names path and host") {
  const std::string base = temp_folder();
  const std::string dir = base + "/nano-2-00ff";
  join_private_folder(dir, "hostB");  // missing: made
  join_private_folder(dir, "hostB");  // ours: joined
  REQUIRE(chmod(dir.c_str(), 0755) == 0);
  CHECK_THROWS_WITH_AS(join_private_folder(dir, "hostB"), (dir + " on hostB has mode 0755: refusing to use it").c_str(),
                       Error);
  REQUIRE(chmod(dir.c_str(), 0700) == 0);
  const std::string link = base + "/nano-2-link";
  REQUIRE(symlink(dir.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH_AS(join_private_folder(link, "hostB"),
                       (link + " on hostB is a symbolic link: refusing to use it").c_str(), Error);
  if (geteuid() == 0) {  // a folder of another user's
    REQUIRE(chown(dir.c_str(), 12345, 12345) == 0);
    CHECK_THROWS_WITH_AS(join_private_folder(dir, "hostB"),
                         (dir + " on hostB belongs to uid 12345: refusing to use it").c_str(), Error);
  }
  remove_tree(base.c_str());
}

TEST_CASE("create_private_file: 0600, never an existing file nor through a link") {
  const std::string base = temp_folder();
  const std::string file = base + "/marker";
  const int fd = create_private_file(file);
  REQUIRE(fd >= 0);
  close(fd);
  struct stat st {};
  REQUIRE(lstat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(create_private_file(file) == -1);
  CHECK(errno == EEXIST);
  const std::string link = base + "/link";
  REQUIRE(symlink((base + "/target").c_str(), link.c_str()) == 0);
  CHECK(create_private_file(link) == -1);  // a dangling link is not followed either
  CHECK(access((base + "/target").c_str(), F_OK) != 0);
  remove_tree(base.c_str());
}
