// The GPU side of a rank program: the arena in device memory, one stream
// every kernel, GEMM and collective of the rank runs on, and the
// communicator (NCCL when every rank has a GPU of its own, else MPI through
// host buffers). Plain C++: generated programs and host code include it
// without CUDA's headers.
#pragma once

#include "runtime/rank/Rank.h"

namespace sbprt::cuda {

class Backend final : public rank::Backend {
public:
  Backend() = default;
  ~Backend() override;

  /// Picks the GPU (the rank's local index modulo the GPUs it sees), makes
  /// the stream and the cuBLAS handle, and chooses the communicator:
  /// SBPRT_COMM=nccl|mpi forces one; by default NCCL when no two ranks of
  /// the job share a GPU, MPI through host buffers when some do (all ranks
  /// decide alike: comm/GpuChoice.h).
  std::unique_ptr<comm::Communicator> attach(std::unique_ptr<comm::Communicator> mpi,
                                             std::string &error) override;
  void *allocate(uint64_t bytes, std::string &error) override;
  void release(void *arena) override;
  bool upload(void *dst, const void *src, size_t bytes, std::string &error) override;
  bool download(void *dst, const void *src, size_t bytes, std::string &error) override;
  bool copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t width,
                size_t rows, std::string &error) override;
  bool fill(void *dst, int64_t n, float value, size_t elementBytes,
            std::string &error) override;
  bool synchronize(std::string &error) override;
  /// CUDA events on the stream: the GPU's time between the marks.
  bool markCompute(bool begin, std::string &error) override;
  double takeComputeSeconds() override;
  /// --profile ops: an event recorded on the stream per op, from a pool
  /// kept for the run.
  int64_t markOp(std::string &error) override;
  double opSeconds(int64_t from, int64_t to, std::string &error) override;
  void resetOpMarks() override;
};

} // namespace sbprt::cuda
