// The checkpoint engine's files (runtime/checkpoint_files/checkpoint_folder.h) against someone who
// can write the folder: links at higher steps and at the next step's name, hard links, forged and
// renamed files, a deleted or replaced key, FIFOs and files of another user, links on the way to
// the folder. After each, every real
// checkpoint is still there and the newest real one is what a run resumes from. And the pure
// decisions (names, the folder's mode, the choice) as tables.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nano/error.h>
#include "runtime/checkpoint_files/checkpoint_folder.h"
#include "tests/common/error_of.h"
#include "tests/common/stderr_capture.h"

#include <doctest/doctest.h>

namespace {

using nano::CheckpointFolder;
using nano::test::error_of;
using nano::test::stderr_of;
constexpr auto kWriter = CheckpointFolder::Role::kWriter;

std::string temp_dir() {
  char tmpl[] = "/tmp/nano_checkpoint_folder_test_XXXXXX";
  return mkdtemp(tmpl);
}

std::string name_of(int64_t step) { return nano::checkpoint_file_name(step); }

// Writes checkpoints of `steps` (payload "state S") and prunes to `keep` after each, as a run does.
void write_steps(CheckpointFolder& f, std::initializer_list<int64_t> steps, int keep = 2) {
  for (int64_t s : steps) {
    const std::string payload = "state " + std::to_string(s);
    f.write(s, 2, "2.6.0", payload.data(), payload.size());
    f.prune(keep, nullptr);
  }
}

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = d ? readdir(d) : nullptr)
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.insert(e->d_name);
  if (d) closedir(d);
  return out;
}

std::string payload_of(CheckpointFolder& f, const std::string& name) {
  const auto reader = f.open_verified(name, "");
  std::string out(reader->header().bytes, '\0');
  CHECK(reader->read(0, out.data(), out.size()) == out.size());
  return out;
}

std::string chosen(CheckpointFolder& f) {
  std::string name;
  stderr_of([&] { name = f.choose().name; });
  return name;
}

}  // namespace

TEST_CASE("checkpoint files: names, both forms, and what is none") {
  CHECK(name_of(500) == "ckpt-000000000500.nano");
  CHECK(nano::checkpoint_file_name(500, "1a2b3c4d") == "ckpt-000000000500.1a2b3c4d.nano");
  struct Row {
    const char* name;
    std::optional<int64_t> step;
  };
  const Row rows[] = {{"ckpt-000000000500.nano", 500},
                      {"ckpt-000000000500.1a2b3c4d.nano", 500},
                      {"ckpt-00000000050.nano", std::nullopt},
                      {"ckpt-000000000500.1a2b3c4z.nano", std::nullopt},
                      {"ckpt-000000000500.nano.tmp", std::nullopt},
                      {"ckpt-00000000050x.nano", std::nullopt},
                      {".tmp-ckpt-000000000500.nano", std::nullopt},
                      {"step-500", std::nullopt}};
  for (const Row& r : rows) {
    CAPTURE(r.name);
    CHECK(nano::checkpoint_step_of(r.name) == r.step);
  }
}

TEST_CASE("checkpoint files: a folder is the user's alone unless shared on purpose") {
  struct Row {
    uid_t uid;
    mode_t mode;
    bool shared;
    std::string why;
  };
  const Row rows[] = {{1000, 040700, false, ""},
                      {1000, 040755, false, ""},
                      {1000, 040775, false, "is writable by others (mode 0775)"},
                      {1000, 041777, false, "is writable by others (mode 1777)"},
                      {0, 040700, false, "belongs to uid 0, not to this user"},
                      {0, 040777, true, ""}};
  for (const Row& r : rows) CHECK(nano::why_not_private_folder(r.uid, r.mode, 1000, r.shared) == r.why);
  const std::string dir = temp_dir();
  chmod(dir.c_str(), 0777);
  CHECK(error_of([&] { CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false); }) ==
        "nano: checkpoint folder " + dir +
            " is writable by others (mode 0777): whoever can write it can plant or remove checkpoints; use a "
            "folder of your own (or make it yours alone: chmod go-w), or set checkpoint_shared_folder if it is "
            "shared on purpose");
  CHECK_NOTHROW(CheckpointFolder(dir, nano::kCppCheckpoints, kWriter, true));
  // A folder it makes is private, and so is the key.
  const std::string made = dir + "/a/b";
  CheckpointFolder f(made, nano::kCppCheckpoints, kWriter, false);
  struct stat st {};
  stat(made.c_str(), &st);
  CHECK((st.st_mode & 0777) == 0700);
  stat((made + "/.nano-key").c_str(), &st);
  CHECK((st.st_mode & 0777) == 0600);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files: which files pruning deletes: only verified ones, only below `keep` newer verified ones") {
  using F = nano::CheckpointFile;
  struct Row {
    const char* what;
    std::vector<F> files;
    int keep;
    std::vector<std::string> pruned;
  };
  const Row rows[] = {
      {"none", {}, 2, {}},
      {"fewer than keep", {{5, "5", true}}, 2, {}},
      {"the oldest verified beyond keep", {{1, "1", true}, {3, "3", true}, {2, "2", true}}, 2, {"1"}},
      {"keep 1", {{1, "1", true}, {2, "2", true}, {3, "3", true}}, 1, {"2", "1"}},
      // Damaged files at higher steps (another job's, a cut copy) neither count nor go.
      {"damaged newer files",
       {{90001, "90001", false}, {90000, "90000", false}, {50, "50", true}, {100, "100", true}},
       1,
       {"50"}},
      {"damaged newer files, keep 2", {{90001, "90001", false}, {50, "50", true}, {100, "100", true}}, 2, {}},
      {"damaged older files stay", {{10, "10", false}, {50, "50", true}, {100, "100", true}}, 1, {"50"}},
      {"nothing verified", {{1, "1", false}, {2, "2", false}}, 1, {}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    CHECK(nano::checkpoints_to_prune(r.files, r.keep) == r.pruned);
  }
}

TEST_CASE("checkpoint files: written sealed, read back verified, pruned to keep") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  write_steps(f, {100, 200, 300});
  CHECK(entries(dir) == std::set<std::string>{".nano-key", name_of(200), name_of(300)});
  CHECK(payload_of(f, name_of(300)) == "state 300");
  const nano::CheckpointChoice c = f.choose();
  CHECK(c.name == name_of(300));
  CHECK(c.step == 300);
  CHECK(c.world == 2);
  CHECK(c.seal.size() == 64);
  CHECK(error_of([&] { f.open_verified(name_of(300), std::string(64, '0')); }) ==
        "nano: checkpoint " + dir + "/" + name_of(300) +
            " is not the one rank 0 chose (its seal differs): every rank must see the same checkpoint folder");
  // A reader of the same folder (another rank) verifies under the same key.
  CheckpointFolder reader(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false);
  CHECK(payload_of(reader, name_of(200)) == "state 200");
  // The other API's files are not this one's.
  CheckpointFolder python(dir, nano::kPythonCheckpoints, CheckpointFolder::Role::kReader, false);
  CHECK(python.why_not(name_of(300)) == "a checkpoint of the C++ API");
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files (attack): links planted at higher steps are never counted, followed nor deleted") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  write_steps(f, {100, 200});
  // Today's Python engine lost every real checkpoint to these two at its next save.
  symlink((dir + "/" + name_of(100)).c_str(), (dir + "/" + name_of(999999)).c_str());
  symlink((dir + "/" + name_of(100)).c_str(), (dir + "/" + name_of(999998)).c_str());
  // A hard link at a higher step: one file of two names counts under neither (never twice), and
  // nothing of it is deleted.
  link((dir + "/" + name_of(100)).c_str(), (dir + "/" + name_of(999997)).c_str());
  write_steps(f, {300});
  CHECK(entries(dir) == std::set<std::string>{".nano-key", name_of(100), name_of(200), name_of(300), name_of(999997),
                                              name_of(999998), name_of(999999)});
  CHECK(f.why_not(name_of(999999)) == "a symbolic link");
  CHECK(f.why_not(name_of(999997)) == "a file of 2 names (hard links)");
  std::string said;
  std::string name;
  said = stderr_of([&] { name = f.choose().name; });
  CHECK(name == name_of(300));
  CHECK(said == "nano: 4 entries of checkpoint folder " + dir +
                    " never loaded, counted as kept or deleted: " + name_of(999999) + " (a symbolic link), " +
                    name_of(999998) + " (a symbolic link), " + name_of(999997) + " (a file of 2 names (hard links)), " +
                    name_of(100) + " (a file of 2 names (hard links))\n");
  CHECK(stderr_of([&] { f.choose(); }).empty());  // each named once
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files (attack): a forged file with a valid unkeyed checksum or a made-up seal never counts") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  write_steps(f, {100, 200});
  // Format 1's header with "bytes 0" and the FNV seed as its sum verified before: it counted
  // toward keep and made the next save prune the real ones.
  std::ofstream(dir + "/" + name_of(999999999999)) << "nano-checkpoint 1\nstep 999999999999\nworld 1\ntorch 1.13\n"
                                                      "bytes 0\nfnv1a64 14650fb0739d0383\n\n";
  // This format with a made-up seal (and tags), and one sealed by another folder's key.
  nano::CheckpointHeader h;
  h.step = 999999999998;
  h.world = 1;
  h.api = nano::kCppCheckpoints;
  h.torch = "2.6.0";
  h.bytes = 4;
  h.key = "0123456789abcdef";
  h.nonce = "0011223344556677";
  h.seal = std::string(64, 'a');
  std::ofstream(dir + "/" + name_of(h.step)) << nano::checkpoint_header(h) << "evil" << std::string(16, 't');
  // Format 2 (sealed, its tags not in the file): an earlier nano's, never loaded.
  std::ofstream(dir + "/" + name_of(999999999996)) << "nano-checkpoint 2\nstep 999999999996\nworld 1\napi c++\n"
                                                      "torch 2.6.0\nbytes 00000000000000000000\nkey 0123456789abcdef\n"
                                                      "nonce 0011223344556677\nhmac-sha256 "
                                                   << std::string(64, 'a') << "\n\n";
  write_steps(f, {300}, 1);
  CHECK(entries(dir) == std::set<std::string>{".nano-key", name_of(300), name_of(999999999996), name_of(999999999998),
                                              name_of(999999999999)});
  CHECK(f.why_not(name_of(999999999999)) == "format 1: written by an earlier nano, never loaded");
  CHECK(f.why_not(name_of(999999999996)) == "format 2: written by an earlier nano, never loaded");
  CHECK(f.why_not(name_of(999999999998)) == "sealed by another key than the folder's (key 0123456789abcdef)");
  // The same key id with a wrong seal: damaged or forged.
  h.step = 999999999997;
  h.key = nano::checkpoint_key_id("whatever");  // not this folder's either
  std::ofstream(dir + "/" + name_of(h.step)) << nano::checkpoint_header(h) << "evil" << std::string(16, 't');
  CHECK(f.why_not(name_of(h.step)).rfind("sealed by another key", 0) == 0);
  CHECK(chosen(f) == name_of(300));
  // A byte flipped in a real one's tags: its seal no longer holds.
  {
    std::fstream file(dir + "/" + name_of(300), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-1, std::ios::end);
    file.put('X');
  }
  CHECK(f.why_not(name_of(300)) == "its seal does not verify (damaged or forged)");
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files (attack): a renamed or copied checkpoint is not another step") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  write_steps(f, {100, 200});
  // Renamed to a higher step: a rollback if it counted.
  CHECK(rename((dir + "/" + name_of(100)).c_str(), (dir + "/" + name_of(900)).c_str()) == 0);
  std::system(
      ("cp -p " + dir + "/" + name_of(200) + " " + dir + "/" + nano::checkpoint_file_name(800, "00000000")).c_str());
  CHECK(f.why_not(name_of(900)) == "its header says step 100");
  CHECK(f.why_not(nano::checkpoint_file_name(800, "00000000")) == "its header says step 200");
  write_steps(f, {300}, 1);
  CHECK(entries(dir) ==
        std::set<std::string>{".nano-key", name_of(300), name_of(900), nano::checkpoint_file_name(800, "00000000")});
  CHECK(chosen(f) == name_of(300));
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files (attack): a deleted or replaced key stops the run; no checkpoint goes") {
  const std::string dir = temp_dir();
  {
    CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
    write_steps(f, {100, 200});
  }
  const std::set<std::string> before = entries(dir);
  unlink((dir + "/.nano-key").c_str());
  CHECK(error_of([&] { CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false); }) ==
        "nano: checkpoint folder " + dir + " holds sealed checkpoints (" + name_of(200) +
            ") but no key .nano-key: it was deleted or moved, and nano makes no new key over them (they would never "
            "verify again): put the key back, or use another folder");
  CHECK(error_of([&] { CheckpointFolder f(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false); }) ==
        "nano: checkpoint folder " + dir +
            " has no key .nano-key (rank 0 makes it): every rank must see the "
            "checkpoint folder");
  // Replaced by a key of its own: the checkpoints are another key's, and the run is refused
  // rather than trained from step 0 over them.
  {
    const int fd = open((dir + "/.nano-key").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    const std::string other(64, 'b');
    CHECK(write(fd, other.data(), other.size()) == 64);
    close(fd);
  }
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  nano::CheckpointChoice c;
  stderr_of([&] { c = f.choose(); });
  CHECK(c.name.empty());
  CHECK(c.refused == "nano: the checkpoints of folder " + dir + " (" + name_of(200) +
                         ") are sealed by another key than its .nano-key: the key was replaced; put the right one "
                         "back, or use another folder");
  CHECK(f.prune(1, nullptr).empty());
  // A key that is a link, or open to others: refused.
  unlink((dir + "/.nano-key").c_str());
  symlink("/etc/hostname", (dir + "/.nano-key").c_str());
  CHECK(error_of([&] { CheckpointFolder g(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false); }) ==
        "nano: cannot read checkpoint folder key " + dir + "/.nano-key: a symbolic link");
  unlink((dir + "/.nano-key").c_str());
  std::ofstream(dir + "/.nano-key") << std::string(64, 'c');
  chmod((dir + "/.nano-key").c_str(), 0644);
  CHECK(error_of([&] {
          CheckpointFolder g(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false);
        }).find("is not this user's private file (owner uid " + std::to_string(geteuid()) + ", mode 0644)") !=
        std::string::npos);
  std::set<std::string> after = entries(dir);
  CHECK(after == before);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files (attack): a link or FIFO at the next step's name: the checkpoint is written beside it") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  write_steps(f, {100});
  const std::string target = dir + ".target";
  std::ofstream(target) << "theirs";
  symlink(target.c_str(), (dir + "/" + name_of(200)).c_str());
  mkfifo((dir + "/" + name_of(300)).c_str(), 0600);
  std::string said;
  said = stderr_of([&] { write_steps(f, {200, 300}, 2); });
  CHECK(said.find("nano: " + dir + "/" + name_of(200) +
                  " was there already (a symbolic link): this checkpoint is "
                  "written beside it, as ckpt-000000000200.") == 0);
  CHECK(said.find(name_of(300) + " was there already (not a regular file)") != std::string::npos);
  std::ifstream in(target);
  std::string text;
  std::getline(in, text);
  CHECK(text == "theirs");
  // The new ones count (100 pruned), the planted ones stay as they were.
  std::vector<std::string> ours;
  for (const std::string& n : entries(dir))
    if (n != ".nano-key" && n != name_of(200) && n != name_of(300)) ours.push_back(n);
  REQUIRE(ours.size() == 2);
  CHECK(nano::checkpoint_step_of(ours[0]) == 200);
  CHECK(nano::checkpoint_step_of(ours[1]) == 300);
  CHECK(payload_of(f, ours[1]) == "state 300");
  CHECK(chosen(f) == ours[1]);
  unlink(target.c_str());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files (attack): a file of another user never counts nor goes") {
  if (geteuid() != 0) {
    MESSAGE("skipped: needs root to make a file of another user");
    return;
  }
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  write_steps(f, {100, 200});
  std::system(("cp -p " + dir + "/" + name_of(200) + " " + dir + "/" + name_of(999)).c_str());
  CHECK(chown((dir + "/" + name_of(999)).c_str(), 65534, 65534) == 0);
  CHECK(f.why_not(name_of(999)) == "owned by uid 65534, not this user");
  write_steps(f, {300}, 1);
  CHECK(entries(dir) == std::set<std::string>{".nano-key", name_of(300), name_of(999)});
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files: which checkpoint a run resumes from, or why it may not start") {
  using E = nano::CheckpointEntry;
  const auto entry = [](const char* name, int64_t step, const char* why, bool old = false, bool other = false) {
    E e;
    e.name = name;
    e.step = step;
    e.why_not = why;
    e.old_format = old;
    e.other_key = other;
    return e;
  };
  struct Row {
    const char* what;
    std::vector<E> entries;
    std::string name, refused, note;
  };
  const std::string d = "/c";
  const Row rows[] = {
      {"empty", {}, "", "", ""},
      {"the newest whole one", {entry("b", 9, "a symbolic link"), entry("a", 5, ""), entry("z", 4, "")}, "a", "", ""},
      {"damaged only: a fresh start, said",
       {entry("a", 5, "its seal does not verify (damaged or forged)")},
       "",
       "",
       "nano: no usable checkpoint in /c (1 not whole or not ours, skipped): training starts from step 0"},
      {"an earlier format only: refused",
       {entry("step-8", 8, "x", true)},
       "",
       "nano: checkpoint folder /c holds checkpoints of an earlier format (step-8) and none of this one: "
       "this nano does not read them; resume with the nano that wrote them, or use another folder",
       ""},
      {"another key only: refused",
       {entry("a", 5, "x", false, true)},
       "",
       "nano: the checkpoints of folder /c (a) are sealed by another key than its .nano-key: the key was replaced; "
       "put the right one back, or use another folder",
       ""},
      {"an earlier format beside a whole one: the whole one",
       {entry("step-9", 9, "x", true), entry("a", 5, "")},
       "a",
       "",
       ""},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    const nano::CheckpointChoice c = nano::choose_checkpoint(r.entries, d);
    CHECK(c.name == r.name);
    CHECK(c.refused == r.refused);
    CHECK(c.note == r.note);
  }
}

TEST_CASE("checkpoint files: ranks making one folder's key at once all get the same, whole key") {
  const std::string dir = temp_dir();
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        CheckpointFolder f(dir + "/run", nano::kCppCheckpoints, kWriter, false);
        const std::string payload = "rank " + std::to_string(i);
        f.write(i + 1, 8, "2.6.0", payload.data(), payload.size());
        _exit(0);
      } catch (const std::exception& e) {
        fprintf(stderr, "%s\n", e.what());
        _exit(1);
      }
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  // Every one sealed under the one key: all verify.
  CheckpointFolder f(dir + "/run", nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false);
  for (int i = 1; i <= 8; ++i) CHECK(f.why_not(name_of(i)) == "");
  std::set<std::string> names = entries(dir + "/run");
  CHECK(names.size() == 9);  // the key and 8 checkpoints: no temporary of a key left
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files: a writer given up leaves nothing; the one just written is never pruned") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  {
    const auto w = f.start(5, 1, "2.6.0");
    w->append("half", 4);
    w->abort();
    CHECK(error_of([&] { w->finish(); }) == "nano: a checkpoint's writer was used after it finished");
  }
  {
    const auto w = f.start(6, 1, "2.6.0");
    w->append("dropped", 7);
  }  // destroyed unfinished
  CHECK(entries(dir) == std::set<std::string>{".nano-key"});
  // Another Checkpointer of the folder starting meanwhile leaves a temporary still being written.
  {
    const auto w = f.start(7, 1, "2.6.0");
    w->append("busy", 4);
    CheckpointFolder(dir, nano::kCppCheckpoints, kWriter, false).remove_temporaries();
    CHECK(w->finish() == name_of(7));
    CHECK(payload_of(f, name_of(7)) == "busy");
    unlink((dir + "/" + name_of(7)).c_str());
  }
  // An older run's higher steps: this run's first checkpoint stays all the same.
  write_steps(f, {900, 800});
  write_steps(f, {100}, 1);
  CHECK(entries(dir) == std::set<std::string>{".nano-key", name_of(900), name_of(100)});
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files (attack): a link on the way to the folder that someone else could have made is refused") {
  if (geteuid() != 0) {
    MESSAGE("skipped: needs root to make a link of another user");
    return;
  }
  const std::string dir = temp_dir();
  chmod(dir.c_str(), 0755);  // the other user reaches the folders inside
  const std::string sticky = dir + "/sticky", open_to_all = dir + "/open", mine = dir + "/mine";
  for (const std::string& d : {sticky, open_to_all}) {
    mkdir(d.c_str(), 0777);
    chmod(d.c_str(), d == sticky ? 01777 : 0777);
  }
  mkdir(mine.c_str(), 0700);
  // Another user's link in a sticky folder (/tmp): it leads into a folder of this user's.
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(1);
    mkdir((sticky + "/run").c_str(), 0755);
    _exit(symlink(mine.c_str(), (sticky + "/run/ckpt").c_str()) == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  const std::string tail =
      ", which may lead anywhere: name the folder it leads to, or set checkpoint_shared_folder if it "
      "is shared on purpose";
  CHECK(error_of([&] { CheckpointFolder f(sticky + "/run/ckpt", nano::kCppCheckpoints, kWriter, false); }) ==
        "nano: checkpoint folder " + sticky + "/run/ckpt: " + sticky +
            "/run/ckpt is a symbolic link of uid 65534, not "
            "this user's" +
            tail);
  CHECK(error_of([&] {
          CheckpointFolder f(sticky + "/run/ckpt/.", nano::kCppCheckpoints, kWriter, false);
        }).find("is a symbolic link of uid 65534") != std::string::npos);
  // This user's link in a folder anyone may rename it in.
  symlink(mine.c_str(), (open_to_all + "/ckpt").c_str());
  CHECK(error_of([&] { CheckpointFolder f(open_to_all + "/ckpt", nano::kCppCheckpoints, kWriter, false); }) ==
        "nano: checkpoint folder " + open_to_all + "/ckpt: " + open_to_all +
            "/ckpt is a symbolic link in a folder others can write" + tail);
  // This user's link in a sticky folder or a folder of its own: the user's way, used.
  symlink(mine.c_str(), (sticky + "/ckpt").c_str());
  CHECK_NOTHROW(CheckpointFolder(sticky + "/ckpt", nano::kCppCheckpoints, kWriter, false));
  symlink(mine.c_str(), (dir + "/ckpt").c_str());
  CHECK_NOTHROW(CheckpointFolder(dir + "/ckpt", nano::kCppCheckpoints, kWriter, false));
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint files (attack): a hard link never counts twice; bad arguments and keys are refused") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, kWriter, false);
  write_steps(f, {400, 500});
  link((dir + "/" + name_of(500)).c_str(), (dir + "/" + nano::checkpoint_file_name(500, "0000abcd")).c_str());
  CHECK(f.prune(2, nullptr).empty());  // 400 stays: 500 under two names is one checkpoint, and counts for none
  CHECK(f.why_not(name_of(500)) == "a file of 2 names (hard links)");
  CHECK(error_of([&] { f.prune(0, nullptr); }) == "nano: checkpoint_keep must be at least 1, got 0");
  CHECK(error_of([&] { f.start(-1, 1, "2.6.0"); }) == "nano: a checkpoint's step must be 0 to 999999999999, got -1");
  CHECK(error_of([&] { f.start(1000000000000, 1, "2.6.0"); }) ==
        "nano: a checkpoint's step must be 0 to 999999999999, got 1000000000000");
  CHECK(error_of([&] { f.start(1, 0, "2.6.0"); }) == "nano: a checkpoint's world must be at least 1, got 0");
  CHECK(error_of([&] { f.start(1, 1, "2.6 cuda"); }) ==
        "nano: a checkpoint's torch version must be one word of at most 64 characters, got \"2.6 cuda\"");
  CHECK(error_of([&] { f.open_verified("../x", ""); }) == "nano: ../x is not a checkpoint's name");
  // A key with anything beside its 64 hex digits is damaged.
  {
    std::ifstream in(dir + "/.nano-key");
    std::string key;
    in >> key;
    unlink((dir + "/.nano-key").c_str());
    const int fd = open((dir + "/.nano-key").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    const std::string junk = key + "\nmore";
    CHECK(write(fd, junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
    close(fd);
  }
  CHECK(error_of([&] { CheckpointFolder g(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false); }) ==
        "nano: checkpoint folder key " + dir + "/.nano-key is damaged: 66 bytes, not 64 lower-case hex digits");
  std::system(("rm -rf " + dir).c_str());
}
