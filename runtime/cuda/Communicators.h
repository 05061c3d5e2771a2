// The communicators of a GPU rank, both behind runtime/comm's interface and
// on device pointers: NCCL (one communicator per mesh axis group,
// bootstrapped by broadcasting an ncclUniqueId over MPI) and MPI through
// host buffers (for ranks that share a GPU, where NCCL refuses to run).
// Both count bytes sent as the ring algorithms the plan assumes.
#pragma once

#include "runtime/comm/Communicator.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace sbprt::cuda {

std::unique_ptr<comm::Communicator> createNcclCommunicator(std::unique_ptr<comm::Communicator> mpi,
                                                           cudaStream_t stream, std::string &error);
std::unique_ptr<comm::Communicator>
createStagedCommunicator(std::unique_ptr<comm::Communicator> mpi, cudaStream_t stream,
                         std::string &error);

} // namespace sbprt::cuda
