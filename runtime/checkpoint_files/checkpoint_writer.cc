#include "runtime/checkpoint_files/checkpoint_folder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <system_error>

#include <nano/error.h>
#include "core/job_secret.h"

// CheckpointFolder::Writer (checkpoint_folder.h): one checkpoint written, sealed and named.
namespace nano {

namespace {

std::string errno_text() { return strerror(errno); }

// Moves `from` to `to` in folder `dir` only if `to` is free: false when it is taken.
bool move_if_free(int dir, const std::string& from, const std::string& to) {
  if (renameat2(dir, from.c_str(), dir, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno == EEXIST) return false;
  if (errno != EINVAL && errno != ENOSYS) throw Error(errno_text());
  // A file system without RENAME_NOREPLACE: link() fails on a taken name as well.
  if (linkat(dir, from.c_str(), dir, to.c_str(), 0) != 0) {
    if (errno == EEXIST) return false;
    throw Error(errno_text());
  }
  unlinkat(dir, from.c_str(), 0);
  return true;
}

}  // namespace

// Whole chunks are sealed as soon as they are written, read back from the page cache in pieces by
// threads of their own: the seal costs the writer almost nothing beside the writing and the fsync.
// What is left when the payload ends, the calling thread seals with them.
struct CheckpointFolder::Writer::Sealer {
  const std::string key;  // copies: the threads never reach into the folder
  const CheckpointHeader header;
  const int fd;
  const off_t payload_at;
  std::mutex mutex;
  std::condition_variable more;
  std::deque<std::pair<uint64_t, size_t>> queue;  // (chunk, its bytes)
  std::map<uint64_t, Tag> tags;
  std::string failed;
  bool closed = false;
  std::vector<std::thread> threads;

  Sealer(std::string k, CheckpointHeader h, int file, off_t at)
      : key(std::move(k)), header(std::move(h)), fd(file), payload_at(at) {
    try {
      // The writer's own core (serialising, copying into the page cache) is not taken from it.
      for (int t = 0; t < seal_threads(); ++t) threads.emplace_back([this] { run(); });
    } catch (const std::system_error&) {
      // no more threads to be had: those started and finish()'s caller do the work
    }
  }
  ~Sealer() { stop(true); }

  void run() {
    std::vector<char> scratch;
    const PayloadSource source = payload_in_file(fd, static_cast<uint64_t>(payload_at));
    for (;;) {
      std::pair<uint64_t, size_t> job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        more.wait(lock, [this] { return closed || !queue.empty(); });
        if (queue.empty()) return;
        job = queue.front();
        queue.pop_front();
      }
      std::string why;
      Tag tag{};
      try {
        tag = checkpoint_chunk_tag(key, header, job.first, job.second, source, scratch);
      } catch (const std::exception& e) {
        why = std::string("cannot seal the payload: ") + e.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (why.empty())
        tags[job.first] = tag;
      else if (failed.empty())
        failed = why;
    }
  }
  void add(uint64_t chunk, size_t n) {
    std::lock_guard<std::mutex> lock(mutex);
    queue.emplace_back(chunk, n);
    more.notify_one();
  }
  void stop(bool drop) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      closed = true;
      if (drop) queue.clear();
      more.notify_all();
    }
    if (!drop) run();
    for (auto& t : threads) t.join();
    threads.clear();
  }
  /// Waits for every chunk of `chunks`: their tags in order.
  std::vector<Tag> finish(uint64_t chunks) {
    stop(false);
    if (!failed.empty()) throw Error(failed);
    if (tags.size() != chunks) throw Error("cannot seal the payload: a chunk was not sealed");
    std::vector<Tag> out;
    for (const auto& [chunk, tag] : tags) out.push_back(tag);
    return out;
  }
};

CheckpointFolder::Writer::Writer(CheckpointFolder& folder, CheckpointHeader header, std::string temporary, int fd)
    : folder_(folder), header_(std::move(header)), temporary_(std::move(temporary)), fd_(fd) {
  // Its length is known now: the payload's count and the seal have fixed widths.
  header_size_ = checkpoint_header(header_).size();
  sealer_ = std::make_unique<Sealer>(folder_.key_, header_, fd_, static_cast<off_t>(header_size_));
}

CheckpointFolder::Writer::~Writer() { abort(); }

void CheckpointFolder::Writer::abort() {
  sealer_.reset();  // its threads read the file: gone before it closes
  if (finished_) return;
  finished_ = true;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  unlinkat(folder_.fd_, temporary_.c_str(), 0);
}

void CheckpointFolder::Writer::seal_whole_chunks() {
  for (uint64_t next = sealed_chunks_; (next + 1) * kSealChunk <= bytes_; next = ++sealed_chunks_)
    sealer_->add(next, kSealChunk);
}

void CheckpointFolder::Writer::fail(const std::string& why) {
  abort();
  failed_ = "nano: cannot write checkpoint " + folder_.dir_ + "/" + checkpoint_file_name(header_.step) + ": " + why;
  throw Error(failed_);
}

void CheckpointFolder::Writer::append(const void* data, size_t n) {
  // The first failure again (torch.save writes its end after a write failed): its cause, not this.
  if (!failed_.empty()) throw Error(failed_);
  if (finished_) throw Error("nano: a checkpoint's writer was used after it finished");
  try {
    write_at(fd_, static_cast<const char*>(data), n, static_cast<off_t>(header_size_ + bytes_));
  } catch (const Error& e) {
    fail(e.what());
  }
  bytes_ += n;
  seal_whole_chunks();
}

std::string CheckpointFolder::Writer::finish() {
  if (!failed_.empty()) throw Error(failed_);
  if (finished_) throw Error("nano: a checkpoint's writer was used after it finished");
  CheckpointFolder& f = folder_;
  header_.bytes = bytes_;
  std::string name = checkpoint_file_name(header_.step), taken;
  try {
    // The disk starts on the rest of the payload while the last chunks are sealed.
    sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
    if (bytes_ > sealed_chunks_ * kSealChunk) sealer_->add(sealed_chunks_, bytes_ - sealed_chunks_ * kSealChunk);
    const std::vector<Tag> tags = sealer_->finish(checkpoint_chunks(bytes_));
    // The tags after the payload: a reader checks the seal over them at once, the chunks as it reads.
    write_at(fd_, tags.data(), tags.size() * sizeof(Tag), header_size_ + bytes_);
    header_.seal = checkpoint_seal_of(f.key_, header_, tags);
    const std::string header = checkpoint_header(header_);
    if (header.size() != header_size_) throw Error("its header changed length");
    write_at(fd_, header.data(), header.size(), 0);
    if (fsync(fd_) != 0) throw Error(errno_text());
  } catch (const Error& e) {
    fail(e.what());
  }
  try {
    // Moved while still open: the temporary's lock (CheckpointFolder::start) keeps
    // remove_temporaries() away from it to the end.
    for (int tries = 0; !move_if_free(f.fd_, temporary_, name); ++tries) {
      if (tries == 3) throw Error("its name and three others beside it are taken");
      if (taken.empty()) taken = name;
      name = checkpoint_file_name(header_.step, hex_of(make_challenge()).substr(0, 8));
    }
  } catch (const Error& e) {
    fail(e.what());
  }
  const int closed = close(fd_);
  fd_ = -1;
  if (closed != 0) {
    const std::string why = errno_text();
    unlinkat(f.fd_, name.c_str(), 0);  // as if it had failed before its move: not a checkpoint
    fail(why);
  }
  finished_ = true;
  sealer_.reset();
  fsync(f.fd_);
  f.written(name, header_, taken);
  return name;
}

}  // namespace nano
