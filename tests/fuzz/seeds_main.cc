// The <name>_seeds programs (tests/fuzz/CMakeLists.txt): write a fuzzer's seeds,
// nano_fuzz_seeds(), into a folder as seed-NN files, each run once through the fuzzer's entry
// point first. scripts/fuzz.sh --seeds puts them into corpus/<name>/.
#include <fstream>
#include <iostream>

#include "tests/fuzz/fuzz_target.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " FOLDER" << std::endl;
    return 2;
  }
  const std::vector<std::string> seeds = nano_fuzz_seeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seeds[i].data()), seeds[i].size());
    const std::string path = std::string(argv[1]) + "/seed-" + (i < 10 ? "0" : "") + std::to_string(i);
    std::ofstream out(path, std::ios::binary);
    out << seeds[i];
    if (!out) {
      std::cerr << "cannot write " << path << std::endl;
      return 1;
    }
  }
  std::cout << seeds.size() << " seeds written to " << argv[1] << std::endl;
  return 0;
}
