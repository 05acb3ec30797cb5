#pragma once
// The checkpoint file's format (nano::Checkpointer writes it, verify_checkpoint checks it): a
// text header (magic line, step, world size, torch version, payload bytes and their FNV-1a
// checksum, a blank line), then torch's archive of the tracked state. Names are
// ckpt-<12-digit step>.nano, so they sort by step. Pure but for listing a folder.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nano {

/// What a checkpoint file's header says; payload_at is where its payload starts.
struct CheckpointHeader {
  int64_t step = -1;
  int world = 0;
  std::string torch;
  uint64_t bytes = 0;
  uint64_t sum = 0;
  size_t payload_at = 0;
};

/// Pure: the header of a checkpoint of `step`, written by `world` ranks, carrying `payload`.
std::string checkpoint_header(int64_t step, int world, const std::string& payload);

/// Pure: reads the header at the start of `text` into `h`; false when it has no whole nano header.
bool parse_checkpoint_header(const std::string& text, CheckpointHeader& h);

/// Pure: the checksum of a payload (FNV-1a, 64 bits): damage, not tampering, is what it finds.
uint64_t checkpoint_checksum(const char* p, std::size_t n);

/// The checkpoints of `dir` (files named as checkpoint_file_name says), newest first, as
/// (step, path); none when the folder cannot be read.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

}  // namespace nano
