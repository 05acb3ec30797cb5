#pragma once
// What each fuzzer here (tests/fuzz/<name>_fuzz.cc) defines and may use: libFuzzer's entry
// point, the seeds of its corpus, and a check of an invariant that the fuzzer sees as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

/// libFuzzer's entry: one input, any bytes. Returns 0; a broken invariant aborts.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/// Real inputs made with the tree's own encoders and formats: the seeds of corpus/<name>/
/// (written by the <name>_seeds program, seeds_main.cc).
std::vector<std::string> nano_fuzz_seeds();

/// Aborts, naming the invariant and where it is checked, when `holds` is false: libFuzzer keeps
/// the input as a crash.
#define NANO_FUZZ_CHECK(holds)                                                           \
  do {                                                                                   \
    if (!(holds)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #holds); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
