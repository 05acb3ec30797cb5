// A checkpoint file's header and size checks (runtime/training/checkpoint_format.h) on any bytes: the pure
// parser, and the file readers that decide whether a file verifies and what may be read of it
// (verify_checkpoint, CheckpointReader), over a file holding the input. What parses is checked as
// pruning and restore use it: the payload starts inside the header's bound, a header written by
// checkpoint_header parses back the same, a file that verifies is exactly its header and payload
// with the checksum it states, and a reader never reads past the payload.
//
// Input: the bytes of one checkpoint file.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <nano/error.h>
#include "runtime/training/checkpoint_format.h"
#include "tests/fuzz/fuzz_target.h"

using namespace nano;

namespace {

// The file the readers look at: one per fuzzing process, rewritten per input, in a folder of its
// own in /dev/shm (no disk). mkdtemp makes the folder 0700 under an unpredictable name, so no
// other user can plant or swap the file; both are removed when the process exits.
std::string folder, path;  // set once, by file()

void remove_file() {
  unlink(path.c_str());
  rmdir(folder.c_str());
}

const std::string& file() {
  if (path.empty()) {
    char made[] = "/dev/shm/nano-fuzz-checkpoint-XXXXXX";
    NANO_FUZZ_CHECK(mkdtemp(made) != nullptr);
    folder = made;
    path = folder + "/checkpoint";
    std::atexit(remove_file);
  }
  return path;
}

void write_file(const uint8_t* data, size_t size) {
  const int fd = open(file().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
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
  const std::string text(reinterpret_cast<const char*>(data), size);
  CheckpointHeader h;
  const bool parsed = parse_checkpoint_header(text, h);
  if (parsed) {
    NANO_FUZZ_CHECK(h.step >= 0 && h.world > 0);
    NANO_FUZZ_CHECK(h.payload_at >= 4 && h.payload_at <= kMaxCheckpointHeader && h.payload_at <= size);
    // A header written for what this one says parses back to the same.
    const std::string payload(static_cast<size_t>(std::min<uint64_t>(h.bytes, 64)), 'p');
    CheckpointHeader again;
    NANO_FUZZ_CHECK(parse_checkpoint_header(
        checkpoint_header(h.step, h.world, h.torch.empty() ? "x" : h.torch, payload) + payload, again));
    NANO_FUZZ_CHECK(again.step == h.step && again.world == h.world && again.bytes == payload.size());
  }
  write_file(data, size);
  const std::string why = verify_checkpoint(file());
  if (why.empty()) {
    // Verified: the header parses, the payload is exactly the rest, and its checksum holds.
    NANO_FUZZ_CHECK(parsed);
    NANO_FUZZ_CHECK(size - h.payload_at == h.bytes);
    NANO_FUZZ_CHECK(checkpoint_checksum(text.data() + h.payload_at, h.bytes) == h.sum);
  }
  try {
    CheckpointReader reader(file());
    NANO_FUZZ_CHECK(parsed && size - h.payload_at == reader.header().bytes);
    char buffer[64];
    const size_t n = reader.read(reader.header().bytes / 2, buffer, sizeof buffer);
    NANO_FUZZ_CHECK(n <= sizeof buffer && n <= reader.header().bytes - reader.header().bytes / 2);
    if (n > 0) NANO_FUZZ_CHECK(std::memcmp(buffer, text.data() + h.payload_at + reader.header().bytes / 2, n) == 0);
    NANO_FUZZ_CHECK(reader.read(reader.header().bytes, buffer, sizeof buffer) == 0);
  } catch (const Error& e) {
    NANO_FUZZ_CHECK(std::string(e.what()).rfind("cannot read checkpoint ", 0) == 0);
  }
  return 0;
}

std::vector<std::string> nano_fuzz_seeds() {
  const std::string payload = "PK\x03\x04 a torch archive would be here";
  std::vector<std::string> seeds = {
      checkpoint_header(500, 4, "1.13.0", payload) + payload,
      checkpoint_header(0, 1, "2.6.0", ""),
      checkpoint_header(90001, 2, "2.6.0", payload).substr(0, 30),        // a header cut short
      checkpoint_header(7, 2, "1.13.0", payload) + payload.substr(0, 5),  // a payload cut short
      "nano-checkpoint 1\nstep 3\nworld 2\nbytes 4\nfnv1a64 0\n\nabcd",   // a wrong checksum
      std::string(200, '\0'),
  };
  return seeds;
}
