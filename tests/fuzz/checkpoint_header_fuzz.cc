// A checkpoint file's header, size and seal checks (runtime/checkpoint_files/checkpoint_format.h) on
// any bytes: the pure parser, and the folder's verdict on a file holding the input
// (CheckpointFolder::why_not, as restore() and pruning ask it) and its reader. What parses is
// checked as they use it: the payload starts inside the header's bound, a header written for what
// this one says parses back the same, a file that verifies is exactly its header, payload and
// chunk tags, sealed under the folder's key, a resume's reading (chunks checked as they are read)
// takes in whole exactly the files that verify, and a reader never reads past the payload.
//
// Input: the bytes of one checkpoint file.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include <nano/error.h>
#include "core/job_secret.h"
#include "runtime/checkpoint_files/checkpoint_folder.h"
#include "tests/fuzz/fuzz_target.h"

using namespace nano;

namespace {

// The folder the input is written into: one per fuzzing process, in /dev/shm (no disk), made
// 0700 under an unpredictable name with its key; removed when the process exits.
std::string dir;      // set once, by folder()
std::string written;  // the last input's file name

void remove_folder() { std::system(("rm -rf " + dir).c_str()); }

CheckpointFolder& folder() {
  static std::unique_ptr<CheckpointFolder> f;
  if (!f) {
    char made[] = "/dev/shm/nano-fuzz-checkpoint-XXXXXX";
    NANO_FUZZ_CHECK(mkdtemp(made) != nullptr);
    dir = made;
    std::atexit(remove_folder);
    f = std::make_unique<CheckpointFolder>(dir, kCppCheckpoints, CheckpointFolder::Role::kWriter, false);
  }
  return *f;
}

std::string folder_key() {
  std::ifstream in(dir + "/.nano-key");
  std::string hex;
  in >> hex;
  return bytes_of_hex(hex).value_or("");
}

// The input as the checkpoint file of `step` (a new file each time: a verdict is never the last one's).
void write_file(const std::string& name, const uint8_t* data, size_t size) {
  if (!written.empty()) unlinkat(AT_FDCWD, (dir + "/" + written).c_str(), 0);
  written = name;
  const int fd = open((dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  NANO_FUZZ_CHECK(fd >= 0);
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    NANO_FUZZ_CHECK(n > 0);
    done += static_cast<size_t>(n);
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckpointFolder& f = folder();
  const std::string text(reinterpret_cast<const char*>(data), size);
  CheckpointHeader h;
  const bool parsed = parse_checkpoint_header(text, h);
  if (parsed) {
    NANO_FUZZ_CHECK(h.step >= 0 && h.world > 0 && h.format >= 1 && h.format <= kCheckpointFormat);
    NANO_FUZZ_CHECK(h.payload_at >= 4 && h.payload_at <= kMaxCheckpointHeader && h.payload_at <= size);
    if (h.format == kCheckpointFormat) {
      // A header written for what this one says parses back to the same.
      CheckpointHeader again;
      NANO_FUZZ_CHECK(parse_checkpoint_header(checkpoint_header(h), again));
      NANO_FUZZ_CHECK(again.step == h.step && again.world == h.world && again.bytes == h.bytes &&
                      again.seal == h.seal && again.key == h.key);
    }
  }
  // Named after the step its header says (a name restore() would look at), else another step's.
  const int64_t step = parsed && h.step < 1000000000000LL ? h.step : 7;
  write_file(checkpoint_file_name(step), data, size);
  const std::string why = f.why_not(checkpoint_file_name(step));
  if (why.empty()) {
    // Verified: this format, the payload and its chunks' tags exactly the rest, the tags those of
    // the payload and the seal theirs under the folder's key.
    const uint64_t chunks = checkpoint_chunks(h.bytes);
    NANO_FUZZ_CHECK(parsed && h.format == kCheckpointFormat && size - h.payload_at == h.bytes + chunks * sizeof(Tag));
    std::vector<Tag> tags;
    std::vector<char> scratch;
    for (uint64_t i = 0; i < chunks; ++i)
      tags.push_back(checkpoint_chunk_tag(
          folder_key(), h, i, checkpoint_chunk_bytes(i, h.bytes),
          [&](uint64_t at, size_t, std::vector<char>&) { return text.data() + h.payload_at + at; }, scratch));
    NANO_FUZZ_CHECK(std::memcmp(tags.data(), text.data() + h.payload_at + h.bytes, chunks * sizeof(Tag)) == 0);
    NANO_FUZZ_CHECK(checkpoint_seal_of(folder_key(), h, tags) == h.seal);
  }
  // A resume's reading (the chunks checked as they are read) takes in exactly what the folder's
  // verdict does: every byte of a file that verifies, and never the whole of one that does not.
  bool loaded = false;
  try {
    const auto reader = f.open_verified(checkpoint_file_name(step), "");
    std::vector<char> payload(64 << 10);
    for (uint64_t at = 0; at < reader->header().bytes;) at += reader->read(at, payload.data(), payload.size());
    reader->wait_verified();
    loaded = true;
  } catch (const Error&) {
  }
  NANO_FUZZ_CHECK(loaded == why.empty());
  try {
    const auto reader = f.open(checkpoint_file_name(step));
    NANO_FUZZ_CHECK(parsed && size - h.payload_at >= reader->header().bytes);
    char buffer[64];
    const uint64_t bytes = reader->header().bytes;
    const size_t n = reader->read(bytes / 2, buffer, sizeof buffer);
    NANO_FUZZ_CHECK(n <= sizeof buffer && n <= bytes - bytes / 2);
    if (n > 0) NANO_FUZZ_CHECK(std::memcmp(buffer, text.data() + h.payload_at + bytes / 2, n) == 0);
    NANO_FUZZ_CHECK(reader->read(bytes, buffer, sizeof buffer) == 0);
  } catch (const Error& e) {
    NANO_FUZZ_CHECK(std::string(e.what()).rfind("cannot read checkpoint ", 0) == 0);
  }
  return 0;
}

// Seeds: whole sealed files of this folder (written by it, so they verify), and broken ones.
std::vector<std::string> nano_fuzz_seeds() {
  CheckpointFolder& f = folder();
  const std::string payload = "PK\x03\x04 a torch archive would be here";
  std::vector<std::string> seeds;
  for (const auto& [step, bytes] : {std::make_pair(int64_t{500}, payload), std::make_pair(int64_t{0}, std::string())}) {
    const std::string name = f.write(step, 4, "2.6.0", bytes.data(), bytes.size());
    std::ifstream in(dir + "/" + name, std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string whole = seeds[0];
  seeds.push_back(whole.substr(0, 30));                // a header cut short
  seeds.push_back(whole.substr(0, whole.size() - 5));  // a payload cut short
  std::string flipped = whole;
  flipped.back() ^= 1;
  seeds.push_back(flipped);                                                           // a wrong seal
  seeds.push_back("nano-checkpoint 1\nstep 3\nworld 2\nbytes 4\nfnv1a64 0\n\nabcd");  // format 1
  seeds.push_back(std::string(200, '\0'));
  return seeds;
}
