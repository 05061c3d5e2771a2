// Tests cluster presets, cluster JSON and which link each mesh axis uses.
#include "compiler/Cost/CostModel.h"
#include "test/unit/TensorTestUtil.h"

#include <gtest/gtest.h>

using namespace sbpc;

namespace {

class CostModelTest : public sbprt::testing::TempFileTest {
protected:
  CostModelTest() : TempFileTest("sbpc_cost_") {}
  std::optional<Cluster> load(const std::string &json, std::string &error) {
    return loadCluster(writeRaw("c.json", json), error);
  }
};

TEST_F(CostModelTest, PresetsLoadByName) {
  for (const std::string &name : clusterPresets()) {
    std::string error;
    std::optional<Cluster> c = loadCluster(name, error);
    ASSERT_TRUE(c) << error;
    EXPECT_EQ(name, c->name);
    EXPECT_GT(c->flops, 0);
    EXPECT_GT(c->intraNode.beta, 0);
  }
}

TEST_F(CostModelTest, InnerAxesFillANodeBeforeCrossingIt) {
  std::string error;
  Cluster c = *loadCluster("dgx-h100-cluster", error);
  // dp=4 x tp=8: tp spans one node (NVLink), dp crosses nodes (InfiniBand).
  sbprt::Mesh mesh{{"dp", "tp"}, {4, 8}};
  EXPECT_EQ("nvlink", c.linkOf(mesh, 1).name);
  EXPECT_EQ("infiniband", c.linkOf(mesh, 0).name);
  // tp=16 no longer fits a node.
  sbprt::Mesh wide{{"dp", "tp"}, {2, 16}};
  EXPECT_EQ("infiniband", c.linkOf(wide, 1).name);
}

TEST_F(CostModelTest, TimesFollowAlphaBeta) {
  Link link{"l", 1e-6, 1e9};
  EXPECT_DOUBLE_EQ(3e-6 + 2e-3, collectiveSeconds(link, 3, 2e6));
  std::string error;
  Cluster c = *loadCluster("cpu", error);
  // Compute-bound and memory-bound ops take the larger of the two times.
  EXPECT_DOUBLE_EQ(1e12 / c.flops, computeSeconds(c, 1e12, 1.0));
  EXPECT_DOUBLE_EQ(1e12 / c.memoryBandwidth, computeSeconds(c, 1.0, 1e12));
  // The CPU has no faster bf16; an H100's tensor cores are.
  EXPECT_DOUBLE_EQ(computeSeconds(c, 1e12, 1.0), computeSeconds(c, 1e12, 1.0, /*bf16=*/true));
  Cluster gpu = *loadCluster("dgx-h100x8", error);
  EXPECT_DOUBLE_EQ(1e15 / gpu.bf16Flops, computeSeconds(gpu, 1e15, 1.0, /*bf16=*/true));
  EXPECT_GT(computeSeconds(gpu, 1e15, 1.0) / computeSeconds(gpu, 1e15, 1.0, true), 10.0);
}

TEST_F(CostModelTest, ReadsAClusterFile) {
  std::string error;
  std::optional<Cluster> c = load(R"({"name": "lab", "device": {"flops": 1e13,
      "memory_bytes": 4e10, "memory_bandwidth": 1e12}, "devices_per_node": 4,
      "intra_node": {"alpha": 2e-6, "beta": 1e11}, "inter_node": {"alpha": 1e-5, "beta": 1e10}})",
                                  error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ("lab", c->name);
  EXPECT_EQ(4, c->devicesPerNode);
  EXPECT_DOUBLE_EQ(1e10, c->interNode.beta);
  EXPECT_EQ(0, c->bf16Flops); // bf16 at the f32 rate
  c = load(R"({"device": {"flops": 1e13, "bf16_flops": 2e14, "memory_bytes": 4e10,
      "memory_bandwidth": 1e12}, "devices_per_node": 4, "intra_node": {"alpha": 2e-6,
      "beta": 1e11}, "inter_node": {"alpha": 1e-5, "beta": 1e10}})",
           error);
  ASSERT_TRUE(c) << error;
  EXPECT_DOUBLE_EQ(2e14, c->bf16Flops);
}

TEST_F(CostModelTest, RejectsBadClusterFiles) {
  const std::pair<const char *, const char *> cases[] = {
      {"[1, 2]", "not a JSON object"},
      // A syntax error says where, as compilers do.
      {"{", "c.json:1:2: not valid JSON (syntax error while parsing object key - unexpected end "
            "of input; expected string literal)"},
      {"{\"device\": {\"flops\": 1,}\n}", "c.json:1:24: not valid JSON (syntax error while "
                                          "parsing object key - unexpected '}'"},
      // A number beyond a double has no position, but is one line.
      {"{\"device\": {\"flops\": 1e400}}",
       "c.json: not valid JSON (number overflow parsing '1e400')"},
      // What the parser last read is left out, even where it holds "'; ".
      {"{\"a\": \"x'; y", "c.json:1:13: not valid JSON (syntax error while parsing value - invalid "
                          "string: missing closing quote)"},
      {"{\"name\": \"a\",\n \"x\": nope}", "c.json:2:8: not valid JSON (syntax error while "
                                           "parsing value - invalid literal)"},
      {R"({"devices_per_node": 8})", "'device' must be an object"},
      {R"({"device": {"flops": -1, "memory_bytes": 1, "memory_bandwidth": 1}})",
       "device: 'flops' must be a positive number"},
      {R"({"device": {"flops": 1, "bf16_flops": "fast", "memory_bytes": 1,
           "memory_bandwidth": 1}, "devices_per_node": 2, "intra_node": {"alpha": 1, "beta": 1},
           "inter_node": {"alpha": 1, "beta": 1}})",
       "device: 'bf16_flops' must be a positive number"},
      {R"({"device": {"flops": 1, "memory_bytes": 1, "memory_bandwidth": 1},
           "devices_per_node": 2.5, "intra_node": {"alpha": 1, "beta": 1},
           "inter_node": {"alpha": 1, "beta": 1}})",
       "'devices_per_node' must be an integer of at most 16777216"},
      {R"({"device": {"flops": 1, "memory_bytes": 1, "memory_bandwidth": 1},
           "devices_per_node": 1e30, "intra_node": {"alpha": 1, "beta": 1},
           "inter_node": {"alpha": 1, "beta": 1}})",
       "'devices_per_node' must be an integer of at most 16777216"},
      {R"({"device": {"flops": 1, "memory_bytes": 1, "memory_bandwidth": 1},
           "devices_per_node": 2, "intra_node": {"alpha": 1}})",
       "intra_node: 'beta' must be a positive number"},
      // Rates that make the model's times infinite (a report of nulls).
      {R"({"device": {"flops": 1e-308, "memory_bytes": 1, "memory_bandwidth": 1},
           "devices_per_node": 2, "intra_node": {"alpha": 1, "beta": 1},
           "inter_node": {"alpha": 1, "beta": 1}})",
       "device: 'flops' must be a positive number in [1e-30, 1e30]"},
  };
  for (auto [json, words] : cases) {
    std::string error;
    EXPECT_FALSE(load(json, error)) << json;
    EXPECT_NE(std::string::npos, error.find(words)) << error;
  }
  std::string error;
  EXPECT_FALSE(loadCluster("dgx-a100", error));
  EXPECT_NE(std::string::npos, error.find("not a preset: cpu, dgx-h100x8, dgx-h100-cluster"))
      << error;
}

} // namespace
