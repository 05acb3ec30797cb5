#include "runtime/checkpoint_files/checkpoint_folder.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include <nano/error.h>
#include "core/job_secret.h"

namespace nano {

namespace {

constexpr const char* kKeyFile = ".nano-key";
constexpr const char* kTemporaryPrefix = ".tmp-";
constexpr const char* kOldPythonPrefix = "step-";  // nano_torch's format 1: a folder per checkpoint

std::string errno_text() { return strerror(errno); }

std::string mode_text(mode_t mode) {
  char text[8];
  snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Never through a link; a read never blocks (a FIFO is refused by the caller's fstat).
int open_at(int dir, const std::string& name, int flags, mode_t mode = 0) {
  const int extra = (flags & O_ACCMODE) == O_RDONLY ? O_NONBLOCK : 0;
  return openat(dir, name.c_str(), flags | extra | O_NOFOLLOW | O_CLOEXEC, mode);
}

// The step of a folder nano_torch's format 1 wrote (step-<digits>), nullopt for any other name.
std::optional<int64_t> old_python_step(const std::string& name) {
  const std::string digits = name.substr(0, 5) == kOldPythonPrefix ? name.substr(5) : "";
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(digits);
}

std::vector<std::string> names_in(int dir) {
  std::vector<std::string> names;
  const int copy = dup(dir);
  if (copy < 0) return names;
  DIR* d = fdopendir(copy);
  if (!d) {
    close(copy);
    return names;
  }
  rewinddir(d);  // the handle is shared by every listing
  while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
  closedir(d);
  return names;
}

int64_t ns_of(const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000LL + t.tv_nsec; }

// Why a link on `path` may be someone else's way into another folder ("" when every link on it,
// and on the paths they lead to, is this user's or root's, in a folder others may not rename
// entries of: not writable by them, or sticky).
std::string why_not_own_links(const std::string& path, int depth = 0) {
  if (depth > 40) return path + " has too many symbolic links";
  std::string rest = path;
  if (rest.empty() || rest[0] != '/') {
    char cwd[PATH_MAX];
    rest = std::string(getcwd(cwd, sizeof cwd) ? cwd : ".") + "/" + rest;
  }
  std::string prefix;
  size_t at = 0;
  while (at <= rest.size()) {
    const size_t slash = rest.find('/', at);
    const std::string part = rest.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    at = slash == std::string::npos ? rest.size() + 1 : slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      prefix = prefix.substr(0, prefix.rfind('/'));
      continue;
    }
    const std::string next = prefix + "/" + part;
    struct stat st {};
    if (lstat(next.c_str(), &st) != 0) return "";  // not there yet: a writer makes it, private
    if (S_ISLNK(st.st_mode)) {
      struct stat above {};
      stat(prefix.empty() ? "/" : prefix.c_str(), &above);
      if (st.st_uid != geteuid() && st.st_uid != 0)
        return next + " is a symbolic link of uid " + std::to_string(st.st_uid) + ", not this user's";
      if ((above.st_mode & (S_IWGRP | S_IWOTH)) && !(above.st_mode & S_ISVTX))
        return next + " is a symbolic link in a folder others can write";
      char target[PATH_MAX];
      const ssize_t n = readlink(next.c_str(), target, sizeof target - 1);
      if (n <= 0) return next + " is a symbolic link that cannot be read";
      const std::string to(target, static_cast<size_t>(n));
      const std::string left = at <= rest.size() ? rest.substr(at) : "";
      return why_not_own_links((to[0] == '/' ? to : prefix + "/" + to) + "/" + left, depth + 1);
    }
    prefix = next;
  }
  return "";
}

}  // namespace

// Which file an entry is while it stays the same: device, inode, size and change time (which
// nobody can set: a file rewritten in place or renamed over is another).
CheckpointFolder::Identity CheckpointFolder::identity_of(const struct stat& st) {
  return Identity{st.st_dev, st.st_ino, st.st_size, ns_of(st.st_ctim)};
}

std::string why_not_private_folder(uid_t uid, mode_t mode, uid_t me, bool shared) {
  if (shared) return "";
  if (uid != me) return "belongs to uid " + std::to_string(uid) + ", not to this user";
  if (mode & (S_IWGRP | S_IWOTH)) return "is writable by others (mode " + mode_text(mode) + ")";
  return "";
}

void check_checkpoint_settings(int64_t every_steps, double every_seconds, int keep) {
  if (every_steps < 0)
    throw UsageError("nano: checkpoint_every_steps must be >= 0, got " + std::to_string(every_steps));
  if (!(every_seconds >= 0))
    throw UsageError("nano: checkpoint_every_seconds must be >= 0, got " + std::to_string(every_seconds));
  if (keep < 1) throw UsageError("nano: checkpoint_keep must be at least 1, got " + std::to_string(keep));
}

CheckpointFolder::CheckpointFolder(const std::string& dir, const std::string& api, Role role, bool shared)
    : dir_(dir), api_(api) {
  if (dir_.empty()) throw UsageError("nano: the checkpoint folder is empty");
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (role == Role::kWriter) {
    // The parents as the user's umask says; the folder itself private.
    const std::filesystem::path parent = std::filesystem::path(dir_).parent_path();
    std::error_code failed;
    if (!parent.empty()) std::filesystem::create_directories(parent, failed);
    if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
      throw UsageError("nano: cannot create checkpoint folder " + dir_ + ": " + errno_text());
  }
  // A link on the way to the folder may lead into another of this user's folders: each must be
  // this user's (or root's), in a folder nobody else may rename it in.
  if (!shared) {
    const std::string why = why_not_own_links(dir_);
    if (!why.empty())
      throw UsageError("nano: checkpoint folder " + dir_ + ": " + why +
                       ", which may lead anywhere: name the folder it leads to, or set checkpoint_shared_folder if it "
                       "is shared on purpose");
  }
  fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == ENOTDIR) throw UsageError("nano: checkpoint folder " + dir_ + " is not a folder");
    throw UsageError("nano: cannot open checkpoint folder " + dir_ + ": " + errno_text());
  }
  try {
    struct stat st {};
    fstat(fd_, &st);
    const std::string why = why_not_private_folder(st.st_uid, st.st_mode, geteuid(), shared);
    if (!why.empty())
      throw UsageError("nano: checkpoint folder " + dir_ + " " + why +
                       ": whoever can write it can plant or remove checkpoints; use a folder of your own (or make it "
                       "yours alone: chmod go-w), or set checkpoint_shared_folder if it is shared on purpose");
    if (role == Role::kWriter && faccessat(fd_, ".", W_OK | X_OK, AT_EACCESS) != 0)
      throw UsageError("nano: cannot write into checkpoint folder " + dir_ + ": " + errno_text());
    read_or_make_key(role);
  } catch (...) {
    close(fd_);
    throw;
  }
}

CheckpointFolder::~CheckpointFolder() { close(fd_); }

void CheckpointFolder::read_or_make_key(Role role) {
  const std::string path = dir_ + "/" + kKeyFile;
  int fd = open_at(fd_, kKeyFile, O_RDONLY);
  if (fd < 0 && errno == ENOENT) {
    if (role == Role::kReader)
      throw UsageError("nano: checkpoint folder " + dir_ + " has no key " + kKeyFile +
                       " (rank 0 makes it): every rank must see the checkpoint folder");
    // Sealed checkpoints without their key would never verify again: no new key over them.
    for (const std::string& name : names_in(fd_)) {
      if (!checkpoint_step_of(name)) continue;
      // Only this user's files: one planted by another user cannot keep the folder from its key.
      struct stat st {};
      if (fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
        continue;
      const int f = open_at(fd_, name, O_RDONLY);
      if (f < 0) continue;
      bool sealed = false;
      try {
        sealed = CheckpointReader(f, name).header().format >= 2;  // formats 2 and 3 are sealed
      } catch (const Error&) {
        // not a whole checkpoint file: nothing a key would unlock
      }
      if (sealed)
        throw Error("nano: checkpoint folder " + dir_ + " holds sealed checkpoints (" + name + ") but no key " +
                    kKeyFile +
                    ": it was deleted or moved, and nano makes no new key over them (they would "
                    "never verify again): put the key back, or use another folder");
    }
    // Written whole under a name of its own, then linked into place: a reader never sees half a
    // key, and of racing writers (every rank of a launch prepares the folder) the first link wins.
    // (Not named like a checkpoint's temporary: remove_temporaries() of a racing rank leaves it.)
    const std::string tmp = std::string(kKeyFile) + ".tmp-" + hex_of(make_challenge());
    const int made = open_at(fd_, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (made < 0) throw Error("nano: cannot write checkpoint folder key " + path + ": " + errno_text());
    try {
      const std::string key = make_job_secret();  // 32 random bytes as 64 hex digits
      write_at(made, key.data(), key.size(), 0);
      if (fsync(made) != 0) throw Error(errno_text());
      if (linkat(fd_, tmp.c_str(), fd_, kKeyFile, 0) != 0 && errno != EEXIST) throw Error(errno_text());
    } catch (const Error& e) {
      close(made);
      unlinkat(fd_, tmp.c_str(), 0);
      throw Error("nano: cannot write checkpoint folder key " + path + ": " + e.what());
    }
    close(made);
    unlinkat(fd_, tmp.c_str(), 0);
    fsync(fd_);
    fd = open_at(fd_, kKeyFile, O_RDONLY);  // ours, or the one a racing writer linked first
  }
  if (fd < 0) {
    const std::string why = errno == ELOOP ? "a symbolic link" : errno_text();
    throw Error("nano: cannot read checkpoint folder key " + path + ": " + why);
  }
  struct stat st {};
  fstat(fd, &st);
  std::string text(66, '\0');
  const ssize_t n = S_ISREG(st.st_mode) ? pread(fd, text.data(), text.size(), 0) : -1;
  close(fd);
  if (!S_ISREG(st.st_mode))
    throw Error("nano: checkpoint folder key " + path + " is not a regular file: refusing the folder");
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0)
    throw Error("nano: checkpoint folder key " + path + " is not this user's private file (owner uid " +
                std::to_string(st.st_uid) + ", mode " + mode_text(st.st_mode) + "): refusing the folder");
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (text.size() == 65 && text.back() == '\n') text.pop_back();
  const auto key = text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos
                       ? bytes_of_hex(text)
                       : std::nullopt;
  if (!key)
    throw Error("nano: checkpoint folder key " + path + " is damaged: " + std::to_string(text.size()) +
                " bytes, not 64 lower-case hex digits");
  key_ = *key;
}

std::string CheckpointFolder::verdict(const std::string& name, CheckpointEntry& entry, bool chunks) {
  struct stat st {};
  if (fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return "gone";
  const Identity id = identity_of(st);
  if (const auto it = known_.find(name);
      it != known_.end() && it->second.first == id &&
      (!chunks || it->second.second.chunks_checked || !it->second.second.why_not.empty())) {
    entry = it->second.second;
    return entry.why_not;
  }
  entry.modified_ns = ns_of(st.st_mtim);
  const auto judge = [&]() -> std::string {
    if (const auto step = old_python_step(name)) {
      entry.old_format = S_ISDIR(st.st_mode) && st.st_uid == geteuid();  // another's cannot hold the folder up
      return entry.old_format ? "a checkpoint of nano_torch's format 1, which this nano does not read"
                              : "not a checkpoint";
    }
    if (S_ISLNK(st.st_mode)) return "a symbolic link";
    if (S_ISDIR(st.st_mode)) return "a folder";
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (st.st_uid != geteuid()) return "owned by uid " + std::to_string(st.st_uid) + ", not this user";
    // One file under two names would count twice toward keep.
    if (st.st_nlink != 1) return "a file of " + std::to_string(st.st_nlink) + " names (hard links)";
    const int fd = open_at(fd_, name, O_RDONLY);
    if (fd < 0) return "unreadable: " + errno_text();
    std::unique_ptr<CheckpointReader> reader;
    try {
      struct stat opened {};
      fstat(fd, &opened);
      if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
        close(fd);
        return "replaced while it was read";
      }
      reader = std::make_unique<CheckpointReader>(fd, name);
    } catch (const Error& e) {
      const std::string what = e.what();
      return what.substr(what.find(": ") + 2);
    }
    const CheckpointHeader& h = reader->header();
    entry.world = h.world;
    entry.seal = h.seal;
    if (h.format != kCheckpointFormat) {
      entry.old_format = true;
      return reader->why_seal_fails(key_);
    }
    if (h.step != entry.step) return "its header says step " + std::to_string(h.step);
    if (h.api != api_)
      return h.api == kPythonCheckpoints ? "a checkpoint of the Python API"
             : h.api == kCppCheckpoints  ? "a checkpoint of the C++ API"
                                         : "a checkpoint of an unknown API (" + h.api + ")";
    if (h.key != checkpoint_key_id(key_)) {
      entry.other_key = true;
      return "sealed by another key than the folder's (key " + h.key + ")";
    }
    // The seal over the header and the tags at once; the chunks (the whole payload read) only
    // when asked: a resume checks them while it loads them.
    if (!chunks) return reader->why_seal_fails(key_);
    entry.chunks_checked = true;
    return reader->why_not_sealed(key_);  // the seal first, then every chunk
  };
  entry.why_not = judge();
  // Remembered only while it is the file that was judged.
  struct stat after {};
  if (fstatat(fd_, name.c_str(), &after, AT_SYMLINK_NOFOLLOW) == 0 && identity_of(after) == id)
    known_[name] = {id, entry};
  return entry.why_not;
}

std::vector<CheckpointEntry> CheckpointFolder::scan(bool chunks) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  std::vector<CheckpointEntry> out;
  for (const std::string& name : names_in(fd_)) {
    auto step = checkpoint_step_of(name);
    if (!step) step = old_python_step(name);
    if (!step) continue;
    CheckpointEntry entry;
    entry.name = name;
    entry.step = *step;
    verdict(name, entry, chunks);
    out.push_back(entry);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.step != b.step) return a.step > b.step;
    return a.modified_ns != b.modified_ns ? a.modified_ns > b.modified_ns : a.name < b.name;
  });
  return out;
}

void CheckpointFolder::tell(const std::vector<CheckpointEntry>& entries) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  std::string names;
  int count = 0;
  for (const CheckpointEntry& e : entries) {
    if (e.why_not.empty() || e.why_not == "gone" || !told_.insert(e.name).second) continue;
    names += (names.empty() ? "" : ", ") + e.name + " (" + e.why_not + ")";
    ++count;
  }
  if (count > 0)
    std::cerr << "nano: " << count << (count == 1 ? " entry" : " entries") << " of checkpoint folder " << dir_
              << " never loaded, counted as kept or deleted: " << names << std::endl;
}

CheckpointChoice choose_checkpoint(const std::vector<CheckpointEntry>& entries, const std::string& dir) {
  CheckpointChoice c;
  std::string old, other;
  int damaged = 0;
  for (const CheckpointEntry& e : entries) {
    if (e.why_not.empty()) {
      c.name = e.name;
      c.seal = e.seal;
      c.step = e.step;
      c.world = e.world;
      return c;
    }
    if (e.old_format && old.empty()) old = e.name;
    if (e.other_key && other.empty()) other = e.name;
    if (e.why_not != "gone") ++damaged;
  }
  if (!old.empty())
    c.refused = "nano: checkpoint folder " + dir + " holds checkpoints of an earlier format (" + old +
                ") and none of this one: this nano does not read them; resume with the nano that wrote them, or "
                "use another folder";
  else if (!other.empty())
    c.refused = "nano: the checkpoints of folder " + dir + " (" + other +
                ") are sealed by another key than its .nano-key: the key was replaced; put the right one back, or "
                "use another folder";
  else if (damaged > 0)
    c.note = "nano: no usable checkpoint in " + dir + " (" + std::to_string(damaged) +
             " not whole or not ours, skipped): training starts from step 0";
  return c;
}

CheckpointChoice CheckpointFolder::choose() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  const std::vector<CheckpointEntry> entries = scan(false);
  tell(entries);
  CheckpointChoice c = choose_checkpoint(entries, dir_);
  if (!c.note.empty()) std::cerr << c.note << std::endl;
  return c;
}

std::string CheckpointFolder::why_not(const std::string& name) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  CheckpointEntry entry;
  entry.name = name;
  const auto step = checkpoint_step_of(name);
  if (!step) return "not a checkpoint's name";
  entry.step = *step;
  return verdict(name, entry);
}

std::unique_ptr<CheckpointFolder::Writer> CheckpointFolder::start(int64_t step, int world, const std::string& torch) {
  // What the header says must read back as written: a step its name can hold, a world, one word.
  if (step < 0 || step > 999999999999LL)
    throw Error("nano: a checkpoint's step must be 0 to 999999999999, got " + std::to_string(step));
  if (world < 1) throw Error("nano: a checkpoint's world must be at least 1, got " + std::to_string(world));
  if (torch.empty() || torch.size() > 64 || torch.find_first_of(" \t\r\n") != std::string::npos)
    throw Error("nano: a checkpoint's torch version must be one word of at most 64 characters, got \"" + torch + "\"");
  CheckpointHeader h;
  h.format = kCheckpointFormat;
  h.step = step;
  h.world = world;
  h.api = api_;
  h.torch = torch;
  h.key = checkpoint_key_id(key_);
  h.nonce = hex_of(make_challenge()).substr(0, 16);
  const std::string tmp = kTemporaryPrefix + hex_of(make_challenge());
  const int fd = open_at(fd_, tmp, O_RDWR | O_CREAT | O_EXCL, 0600);  // read back to be sealed
  if (fd < 0)
    throw Error("nano: cannot write checkpoint " + dir_ + "/" + checkpoint_file_name(step) + ": " + errno_text());
  // Locked while it is written: remove_temporaries() (another Checkpointer of this folder starting)
  // leaves a temporary that is in use.
  flock(fd, LOCK_EX | LOCK_NB);
  try {
    return std::unique_ptr<Writer>(new Writer(*this, h, tmp, fd));
  } catch (...) {
    close(fd);
    unlinkat(fd_, tmp.c_str(), 0);
    throw;
  }
}

void CheckpointFolder::written(const std::string& name, const CheckpointHeader& h, const std::string& taken) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  last_written_ = name;
  // Known whole without reading it again.
  CheckpointEntry entry;
  entry.name = name;
  entry.step = h.step;
  entry.world = h.world;
  entry.seal = h.seal;
  entry.chunks_checked = true;
  struct stat st {};
  if (fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    entry.modified_ns = ns_of(st.st_mtim);
    known_[name] = {identity_of(st), entry};
  }
  if (!taken.empty()) {
    CheckpointEntry there;
    there.name = taken;
    there.step = h.step;
    const std::string why = verdict(taken, there);
    std::cerr << "nano: " << dir_ << "/" << taken << " was there already ("
              << (why.empty() ? "a checkpoint of this step" : why) << "): this checkpoint is written beside it, as "
              << name << std::endl;
    told_.insert(taken);
  }
}

std::string CheckpointFolder::write(int64_t step, int world, const std::string& torch, const void* payload,
                                    size_t bytes) {
  const std::unique_ptr<Writer> w = start(step, world, torch);
  w->append(payload, bytes);
  return w->finish();
}

std::vector<std::string> CheckpointFolder::prune(int keep, const std::function<void()>& before,
                                                 std::vector<CheckpointEntry>* seen) {
  check_checkpoint_settings(0, 0, keep);
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  const std::vector<CheckpointEntry> entries = scan();  // newest first; of one step, the later written
  if (seen) *seen = entries;
  std::vector<CheckpointFile> files;
  for (const CheckpointEntry& e : entries) files.push_back({e.step, e.name, e.why_not.empty()});
  std::vector<std::string> old = checkpoints_to_prune(files, keep);
  // Never the one this object just wrote: a run below older, higher steps keeps its own progress.
  old.erase(std::remove(old.begin(), old.end(), last_written_), old.end());
  std::vector<std::string> deleted;
  if (old.empty()) return deleted;
  if (before) before();
  for (const std::string& name : old) {
    // Only the very file that verified: a name swapped since is someone else's, and stays.
    const auto it = known_.find(name);
    struct stat st {};
    if (it == known_.end() || fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (identity_of(st) != it->second.first || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
    if (unlinkat(fd_, name.c_str(), 0) == 0) deleted.push_back(name);
    known_.erase(it);
  }
  fsync(fd_);
  return deleted;
}

void CheckpointFolder::remove_temporaries() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  for (const std::string& name : names_in(fd_)) {
    struct stat st {};
    if (name.rfind(kTemporaryPrefix, 0) != 0 || fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || st.st_uid != geteuid())
      continue;
    // A writer still at work holds its temporary's lock: only a dead writer's goes.
    const int fd = open_at(fd_, name, O_RDONLY);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) unlinkat(fd_, name.c_str(), 0);
    close(fd);
  }
}

std::unique_ptr<CheckpointReader> CheckpointFolder::open(const std::string& name) const {
  const int fd = open_at(fd_, name, O_RDONLY);
  if (fd < 0)
    throw Error("cannot read checkpoint " + dir_ + "/" + name + ": " +
                (errno == ELOOP ? std::string("a symbolic link") : errno_text()));
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_uid != geteuid()) {
    close(fd);
    throw Error("cannot read checkpoint " + dir_ + "/" + name + ": owned by uid " + std::to_string(st.st_uid) +
                ", not this user");
  }
  return std::make_unique<CheckpointReader>(fd, dir_ + "/" + name);
}

std::unique_ptr<CheckpointReader> CheckpointFolder::open_verified(const std::string& name, const std::string& seal) {
  if (!checkpoint_step_of(name)) throw Error("nano: " + name + " is not a checkpoint's name");
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  std::unique_ptr<CheckpointReader> reader;
  try {
    reader = open(name);
  } catch (const Error& e) {
    throw Error(std::string("nano: ") + e.what());
  }
  const CheckpointHeader& h = reader->header();
  const std::string path = dir_ + "/" + name;
  if (!seal.empty() && h.seal != seal)
    throw Error("nano: checkpoint " + path +
                " is not the one rank 0 chose (its seal differs): every rank must see the same checkpoint folder");
  if (h.format != kCheckpointFormat || h.api != api_ || checkpoint_step_of(name) != h.step)
    throw Error("nano: checkpoint " + path + " is not a sealed checkpoint of this API and step");
  // A file this process wrote or verified whole, still the same file (its descriptor says so): not
  // read twice.
  struct stat st {};
  const auto known = known_.find(name);
  if (fstat(reader->fd(), &st) == 0 && known != known_.end() && known->second.second.why_not.empty() &&
      known->second.second.chunks_checked && known->second.first == identity_of(st))
    return reader;
  reader->verify_while_reading(key_);
  return reader;
}

void CheckpointFolder::damaged(const std::string& name, const std::string& why) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  struct stat st {};
  const auto known = known_.find(name);
  if (fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || known == known_.end() ||
      known->second.first != identity_of(st))
    return;  // another file now, or gone: the next scan judges it afresh
  CheckpointEntry& e = known->second.second;
  e.why_not = why;
  e.chunks_checked = true;
  tell({e});
}

}  // namespace nano
