#include "runtime/checkpoint_files/checkpoint_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <nano/error.h>

namespace nano {

namespace {

std::string text_of(const Tag& t) { return std::string(t.begin(), t.end()); }

std::string chunk_text(uint64_t index, uint64_t chunks) {
  return "chunk " + std::to_string(index + 1) + " of " + std::to_string(chunks);
}

}  // namespace

// The chunks checked in order by threads of their own while the caller reads: the caller waits
// only for the chunks it reads, and checks one itself when no thread has begun it (a reader that
// starts at the payload's end, as a zip archive's does, does not wait for the chunks before it).
struct CheckpointReader::Verifier {
  enum State : char { kFree, kTaken, kGood, kBad };
  const CheckpointReader& reader;
  const std::string key;
  const uint64_t chunks;
  std::mutex mutex;
  std::condition_variable checked;
  std::vector<char> state;
  std::map<uint64_t, std::string> bad;  // why, by chunk
  uint64_t next = 0;                    // where the threads look for a free chunk
  bool stopping = false;
  std::vector<std::thread> threads;

  Verifier(const CheckpointReader& r, std::string k)
      : reader(r), key(std::move(k)), chunks(checkpoint_chunks(r.header_.bytes)), state(chunks, kFree) {
    try {
      // The caller is the one more: it reads, and checks what it reaches first.
      for (int t = 0; t < seal_threads(); ++t) threads.emplace_back([this] { run(); });
    } catch (const std::exception&) {
      // no thread to be had: those started and the caller check the chunks as it reads
    }
  }
  ~Verifier() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    for (auto& t : threads) t.join();
  }

  // Under `mutex`: chunk `i` taken to be checked, when nobody has begun it.
  bool take(uint64_t i) {
    if (state[i] != kFree) return false;
    state[i] = kTaken;
    return true;
  }
  // Under `mutex`: the next chunk nobody has begun, taken; `chunks` when none is left.
  uint64_t take_next() {
    while (next < chunks && !take(next)) ++next;
    return next;
  }
  bool done(uint64_t i) const { return state[i] == kGood || state[i] == kBad; }

  void check(uint64_t i, std::vector<char>& scratch) {
    const CheckpointHeader& h = reader.header_;
    std::string why;
    try {
      const Tag tag = checkpoint_chunk_tag(key, h, i, checkpoint_chunk_bytes(i, h.bytes),
                                           payload_in_file(reader.fd_, h.payload_at), scratch);
      if (!equal_in_constant_time(text_of(tag), text_of(reader.tags_[i])))
        why = chunk_text(i, chunks) + " does not verify (damaged or forged)";
    } catch (const std::exception& e) {
      why = std::string("unreadable: ") + e.what();
    }
    std::lock_guard<std::mutex> lock(mutex);
    state[i] = why.empty() ? kGood : kBad;
    if (!why.empty()) bad[i] = why;
    checked.notify_all();
  }
  void run() {
    std::vector<char> scratch;
    for (;;) {
      uint64_t i;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (stopping || (i = take_next()) == chunks) return;
      }
      check(i, scratch);
    }
  }
  /// Waits for chunks [first, last) to be checked: checks those still free itself and, while a
  /// thread is still on one, the next free chunk beyond (the caller's core helps rather than sleeps).
  void wait(uint64_t first, uint64_t last) {
    std::vector<char> scratch;
    for (uint64_t i = first; i < last; ++i) {
      bool mine = false;
      {
        std::lock_guard<std::mutex> lock(mutex);
        mine = take(i);
      }
      if (mine) check(i, scratch);
    }
    for (uint64_t i = first; i < last; ++i) {
      for (;;) {
        uint64_t help = 0;
        {
          std::unique_lock<std::mutex> lock(mutex);
          if (done(i)) break;
          if ((help = take_next()) == chunks) {
            checked.wait(lock, [&] { return done(i); });
            break;
          }
        }
        check(help, scratch);
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (state[i] == kBad) throw Error("nano: checkpoint " + reader.name_ + ": " + bad[i]);
    }
  }
};

CheckpointReader::CheckpointReader(int fd, const std::string& name) : name_(name), fd_(fd) {
  struct stat st {};
  std::string why;
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else {
    std::string head(kMaxCheckpointHeader, '\0');
    head.resize(read_at(fd_, head.data(), head.size(), 0));
    if (!parse_checkpoint_header(head, header_)) {
      why = head.empty() ? "empty or unreadable" : "not a nano checkpoint";
    } else {
      // Earlier formats have no tags: their size is header and payload.
      const uint64_t have = static_cast<uint64_t>(st.st_size) - header_.payload_at;
      const bool tagged = header_.format == kCheckpointFormat;
      const uint64_t tags = tagged && header_.bytes <= have ? checkpoint_chunks(header_.bytes) * sizeof(Tag) : 0;
      if (have < header_.bytes + tags)
        why = "truncated: " + std::to_string(have) + " of " + std::to_string(header_.bytes + tags) +
              " bytes after its header";
      else if (have > header_.bytes + tags)
        why = "longer than its header says";
      if (why.empty() && tagged) {
        tags_.resize(checkpoint_chunks(header_.bytes));
        if (read_at(fd_, tags_.data(), tags, header_.payload_at + header_.bytes) != tags) why = "its tags unreadable";
      }
    }
  }
  if (!why.empty()) {
    close(fd_);
    throw Error("cannot read checkpoint " + name_ + ": " + why);
  }
}

CheckpointReader::~CheckpointReader() {
  verifier_.reset();  // its threads read the file: gone before it closes
  close(fd_);
}

std::string CheckpointReader::why_seal_fails(const std::string& key) const {
  if (header_.format != kCheckpointFormat)
    return "format " + std::to_string(header_.format) + ": written by an earlier nano, never loaded";
  if (equal_in_constant_time(checkpoint_seal_of(key, header_, tags_), header_.seal)) return "";
  return header_.key == checkpoint_key_id(key) ? "its seal does not verify (damaged or forged)"
                                               : "sealed by another key than the folder's (key " + header_.key + ")";
}

std::string CheckpointReader::why_not_sealed(const std::string& key) const {
  if (std::string why = why_seal_fails(key); !why.empty()) return why;
  // Every chunk, by this thread and the verifier's; the first that does not verify says why.
  Verifier all(*this, key);
  try {
    all.wait(0, all.chunks);
  } catch (const Error&) {
    std::lock_guard<std::mutex> lock(all.mutex);
    return all.bad.begin()->second;
  }
  return "";
}

void CheckpointReader::verify_while_reading(const std::string& key) {
  if (std::string why = why_seal_fails(key); !why.empty()) throw Error("nano: checkpoint " + name_ + ": " + why);
  verifier_ = std::make_unique<Verifier>(*this, key);
}

size_t CheckpointReader::read(uint64_t at, void* buffer, size_t n) {
  if (at >= header_.bytes) return 0;
  n = static_cast<size_t>(std::min<uint64_t>(n, header_.bytes - at));
  const size_t got = read_at(fd_, buffer, n, header_.payload_at + at);
  // Read first, then waited for: the copy and the check of one chunk run at once.
  if (verifier_ && got > 0) verifier_->wait(at / kSealChunk, (at + got - 1) / kSealChunk + 1);
  return got;
}

void CheckpointReader::wait_verified() {
  if (verifier_) verifier_->wait(0, verifier_->chunks);
}

std::string CheckpointReader::why_damaged() const {
  if (!verifier_) return "";
  std::lock_guard<std::mutex> lock(verifier_->mutex);
  return verifier_->bad.empty() ? "" : verifier_->bad.begin()->second;
}

}  // namespace nano
