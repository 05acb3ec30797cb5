// A checkpoint read as a resume reads it (runtime/checkpoint_files/checkpoint_reader.h): the
// chunks checked on other cores while the reader reads, in any order, a read returning only bytes
// that verified. Against someone who changed bytes of a real checkpoint: a payload byte (its seal
// over the tags still holds, the chunk does not), a tag, the last chunk only.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <nano/error.h>
#include "runtime/checkpoint_files/checkpoint_folder.h"
#include "tests/common/error_of.h"
#include "tests/common/stderr_capture.h"

#include <doctest/doctest.h>

namespace {

using nano::CheckpointFolder;
using nano::kSealChunk;
using nano::test::error_of;
using nano::test::stderr_of;

std::string temp_dir() {
  char tmpl[] = "/tmp/nano_checkpoint_reader_test_XXXXXX";
  return mkdtemp(tmpl);
}

// A payload of two whole chunks and a short third, each byte its offset's pattern.
std::string payload_of_three_chunks() {
  std::string p(2 * kSealChunk + 1000, '\0');
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<char>((i * 7 + i / 4096) & 0xff);
  return p;
}

// Flips the byte at payload offset `at` of checkpoint `path` (its header `header_bytes` long).
void flip(const std::string& path, size_t header_bytes, uint64_t at) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(header_bytes + at));
  const char c = static_cast<char>(file.get());
  file.seekp(static_cast<std::streamoff>(header_bytes + at));
  file.put(static_cast<char>(c ^ 1));
}

}  // namespace

TEST_CASE("checkpoint reader: chunks verified while read, from the end first as a zip reader does") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kWriter, false);
  const std::string payload = payload_of_three_chunks();
  const std::string name = f.write(4, 2, "2.6.0", payload.data(), payload.size());
  struct stat st {};
  REQUIRE(stat((dir + "/" + name).c_str(), &st) == 0);
  // Header, payload and one 16-byte tag per chunk, nothing else.
  const auto reader0 = f.open(name);
  CHECK(static_cast<uint64_t>(st.st_size) == reader0->header().payload_at + payload.size() + 3 * 16);
  // Another rank's folder object, which has not seen the file: it checks the chunks as it reads.
  CheckpointFolder other(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false);
  const auto reader = other.open_verified(name, "");
  std::string back(payload.size(), '\0');
  // The end, then a read across the first two chunks' border, then the rest.
  CHECK(reader->read(payload.size() - 100, &back[payload.size() - 100], 500) == 100);
  CHECK(reader->read(kSealChunk - 10, &back[kSealChunk - 10], 20) == 20);
  for (uint64_t at = 0; at < payload.size(); at += 1 << 20)
    CHECK(reader->read(at, &back[at], std::min<size_t>(1 << 20, payload.size() - at)) > 0);
  CHECK_NOTHROW(reader->wait_verified());
  CHECK(reader->why_damaged().empty());
  CHECK(back == payload);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint reader (attack): a changed payload byte is found as it is read; the one before is chosen") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kWriter, false);
  const std::string payload = payload_of_three_chunks();
  f.write(4, 2, "2.6.0", payload.data(), payload.size());
  const std::string name = f.write(8, 2, "2.6.0", payload.data(), payload.size());
  const std::string path = dir + "/" + name;
  flip(path, f.open(name)->header().payload_at, kSealChunk + 5);  // in the second chunk
  // A restarted rank 0: the seal over the header and tags holds, so it is chosen; loading it finds
  // the chunk, and the reads of the chunks around it are the file's own.
  CheckpointFolder restarted(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kWriter, false);
  CHECK(restarted.choose().name == name);
  const auto reader = restarted.open_verified(name, "");
  char buffer[64];
  CHECK(reader->read(0, buffer, sizeof buffer) == sizeof buffer);
  CHECK(reader->read(2 * kSealChunk, buffer, sizeof buffer) == sizeof buffer);
  const std::string said = "nano: checkpoint " + path + ": chunk 2 of 3 does not verify (damaged or forged)";
  CHECK(error_of([&] { reader->read(kSealChunk, buffer, sizeof buffer); }) == said);
  CHECK(error_of([&] { reader->wait_verified(); }) == said);
  CHECK(reader->why_damaged() == "chunk 2 of 3 does not verify (damaged or forged)");
  // Named once, never chosen again, never counted toward keep nor deleted.
  CHECK(stderr_of([&] { restarted.damaged(name, reader->why_damaged()); }) ==
        "nano: 1 entry of checkpoint folder " + dir + " never loaded, counted as kept or deleted: " + name +
            " (chunk 2 of 3 does not verify (damaged or forged))\n");
  CHECK(restarted.choose().name == nano::checkpoint_file_name(4));
  CHECK(restarted.prune(1, nullptr).empty());
  // A folder's own verdict (what pruning asks) reads every chunk.
  CheckpointFolder fresh(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false);
  CHECK(fresh.why_not(name) == "chunk 2 of 3 does not verify (damaged or forged)");
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint reader (attack): a changed tag or a file cut short never verifies nor reads") {
  const std::string dir = temp_dir();
  CheckpointFolder f(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kWriter, false);
  const std::string payload = payload_of_three_chunks();
  const std::string name = f.write(4, 2, "2.6.0", payload.data(), payload.size());
  const std::string path = dir + "/" + name;
  const size_t header = f.open(name)->header().payload_at;
  flip(path, header, payload.size() + 16);  // the second chunk's tag
  CheckpointFolder reader(dir, nano::kCppCheckpoints, CheckpointFolder::Role::kReader, false);
  CHECK(error_of([&] { reader.open_verified(name, ""); }) ==
        "nano: checkpoint " + path + ": its seal does not verify (damaged or forged)");
  CHECK(truncate(path.c_str(), static_cast<off_t>(header + payload.size() + 16)) == 0);
  CHECK(error_of([&] { reader.open_verified(name, ""); }) ==
        "nano: cannot read checkpoint " + path + ": truncated: " + std::to_string(payload.size() + 16) + " of " +
            std::to_string(payload.size() + 48) + " bytes after its header");
  std::system(("rm -rf " + dir).c_str());
}
