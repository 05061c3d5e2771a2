// `bin/assemble PROGRAM_DIR OUTPUT_DIR`: a compiled bundle's outputs put
// together from the shards its ranks wrote under OUTPUT_DIR/.shards, as
// `sbpc run` does, where there is no sbpc (launch.sh calls it after the
// ranks end).
#include "runtime/rank/Program.h"

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  if (argc != 3 || std::string(argv[1]).rfind('-', 0) == 0) {
    std::fprintf(stderr,
                 "usage: %s PROGRAM_DIR OUTPUT_DIR\n"
                 "Puts each output of the compiled program in PROGRAM_DIR together from "
                 "the shards its ranks wrote under OUTPUT_DIR/.shards, as "
                 "OUTPUT_DIR/NAME.npy, and what they measured as OUTPUT_DIR/run.json.\n",
                 argv[0]);
    return 2;
  }
  std::string error;
  std::optional<sbprt::rank::ProgramManifest> manifest =
      sbprt::rank::readProgramManifest(argv[1], error);
  if (!manifest || !sbprt::rank::assembleOutputs(
                       *manifest, argv[1], argv[2],
                       [](const std::string &path, const std::vector<int64_t> &shape) {
                         std::printf("wrote %s %s\n", path.c_str(),
                                     sbprt::shapeToString(shape).c_str());
                       },
                       error)) {
    std::fprintf(stderr, "assemble: error: %s\n", error.c_str());
    return 1;
  }
  return 0;
}
