// The job's choice between NCCL and MPI (runtime/comm/GpuChoice.h): every
// rank decides the same from what all of them said.
#include "runtime/comm/GpuChoice.h"

#include <gtest/gtest.h>

using sbprt::comm::chooseNccl;
using sbprt::comm::GpuRank;

namespace {

GpuRank rank(const std::string &host, const std::string &gpu, bool wants = true) {
  GpuRank r;
  r.host = host;
  r.gpu = gpu;
  r.wantsNccl = wants;
  return GpuRank::decode(r.encode()); // as the others receive it
}

TEST(GpuChoice, EncodingKeepsEveryField) {
  GpuRank r = rank("node 7.cluster", "0a1b2c", false);
  EXPECT_EQ(r.host, "node 7.cluster");
  EXPECT_EQ(r.gpu, "0a1b2c");
  EXPECT_FALSE(r.wantsNccl);
  EXPECT_TRUE(rank("n", "g").wantsNccl);
}

TEST(GpuChoice, NcclWhenEveryRankHasItsOwnGpu) {
  std::string why;
  // One GPU each, on two nodes.
  EXPECT_TRUE(chooseNccl({rank("a", "g0"), rank("a", "g1"), rank("b", "g2"), rank("b", "g3")},
                         why));
  EXPECT_EQ(why, "");
}

TEST(GpuChoice, AGpuIsItsUuidWhateverTheHostName) {
  std::string why;
  // Two containers on one machine, each with its own host name, given the
  // same GPU.
  EXPECT_FALSE(chooseNccl({rank("box-1", "g0"), rank("box-2", "g0")}, why));
  EXPECT_EQ(why, "rank 1 shares GPU g0 on box-2 with another rank, and NCCL needs a GPU for each");
}

TEST(GpuChoice, MpiWhenTwoRanksShareAGpu) {
  std::string why;
  // As with more ranks than GPUs on one node, or every rank given the same
  // one by CUDA_VISIBLE_DEVICES.
  EXPECT_FALSE(chooseNccl({rank("a", "g0"), rank("b", "g0"), rank("a", "g0")}, why));
  EXPECT_EQ(why, "rank 2 shares GPU g0 on a with another rank, and NCCL needs a GPU for each");
}

TEST(GpuChoice, MpiWhenSomeRankDoesNotWantNccl) {
  std::string why;
  EXPECT_FALSE(chooseNccl({rank("a", "g0"), rank("a", "g1", false)}, why));
  EXPECT_EQ(why, "rank 1 does not (SBPRT_COMM=mpi)");
}

TEST(GpuChoice, NoConflictWhenNoRankWantsNccl) {
  std::string why;
  // One rank alone, or SBPRT_COMM=mpi everywhere: MPI, and nothing to say.
  EXPECT_FALSE(chooseNccl({rank("a", "g0", false), rank("a", "g0", false)}, why));
  EXPECT_EQ(why, "");
}

} // namespace
