// The simulated mesh: layouts and collectives on in-memory shards.
#include "runtime/sim/SimulatedMesh.h"

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

namespace sbprt::sim {
namespace {

/// Part `index` of `parts` equal parts of `t` along `dim` (any dtype).
Tensor chunk(const Tensor &t, int64_t dim, int64_t index, int64_t parts) {
  std::vector<int64_t> starts(t.rank(), 0), limits = t.shape();
  int64_t len = t.shape()[dim] / parts;
  starts[dim] = index * len;
  limits[dim] = starts[dim] + len;
  std::vector<int64_t> shape = t.shape();
  shape[dim] = len;
  Tensor out(t.dtype(), shape);
  cpu::slice(t.data(), dtypeSize(t.dtype()), t.shape(), starts, limits, out.data());
  return out;
}

/// Concatenation of equal-shaped `parts` along `dim` (any dtype).
Tensor concat(const std::vector<const Tensor *> &parts, int64_t dim) {
  std::vector<const void *> data;
  for (const Tensor *p : parts)
    data.push_back(p->data());
  std::vector<int64_t> shape = parts[0]->shape();
  shape[dim] *= static_cast<int64_t>(parts.size());
  Tensor out(parts[0]->dtype(), shape);
  cpu::concat(data, dtypeSize(out.dtype()), std::vector<cpu::Shape>(parts.size(), parts[0]->shape()),
              dim, out.data());
  return out;
}

/// Elementwise sum or max of f32 tensors of one shape.
Tensor reduce(const std::vector<const Tensor *> &parts, Sbp::Reduce kind) {
  Tensor out = *parts[0];
  float *o = out.as<float>();
  for (size_t p = 1; p < parts.size(); ++p)
    for (int64_t i = 0; i < out.numElements(); ++i) {
      float v = parts[p]->as<float>()[i];
      o[i] = kind == Sbp::Reduce::Sum ? o[i] + v : std::max(o[i], v);
    }
  return out;
}

/// A tensor of the shape of `t` filled with `value`.
Tensor filled(const Tensor &t, float value) {
  Tensor out(t.dtype(), t.shape());
  std::fill(out.as<float>(), out.as<float>() + out.numElements(), value);
  return out;
}

/// The identity of a partial reduction: what a rank holding nothing holds.
float identityOf(Sbp::Reduce kind) {
  return kind == Sbp::Reduce::Sum ? 0.0f : -std::numeric_limits<float>::infinity();
}

/// `value` written into block `index` of `parts` along `dim` of a tensor
/// otherwise holding `fill`.
Tensor embed(const Tensor &value, int64_t dim, int64_t index, int64_t parts, float fill) {
  std::vector<const Tensor *> pieces;
  Tensor empty = filled(value, fill);
  for (int64_t c = 0; c < parts; ++c)
    pieces.push_back(c == index ? &value : &empty);
  return concat(pieces, dim);
}

/// `parts` tensors whose sum (or max) is `value`: small dyadic random values
/// keep float sums exact.
std::vector<Tensor> decompose(const Tensor &value, int64_t parts, Sbp::Reduce kind,
                              std::mt19937_64 &rng) {
  std::uniform_int_distribution<int> eighths(-16, 16);
  std::vector<Tensor> out(parts, value);
  int64_t n = value.numElements();
  for (int64_t i = 0; i < n; ++i) {
    float v = value.as<float>()[i];
    if (kind == Sbp::Reduce::Sum) {
      float rest = v;
      for (int64_t p = 1; p < parts; ++p) {
        float share = eighths(rng) / 8.0f;
        out[p].as<float>()[i] = share;
        rest -= share;
      }
      out[0].as<float>()[i] = rest;
    } else {
      int64_t holder = static_cast<int64_t>(rng() % parts);
      for (int64_t p = 0; p < parts; ++p)
        out[p].as<float>()[i] = p == holder ? v : v - (1 + std::abs(eighths(rng))) / 8.0f;
    }
  }
  return out;
}

} // namespace

Shards distribute(const Tensor &global, const Mesh &mesh, const NdSbp &layout, uint64_t seed) {
  Shards shards(mesh.numDevices());
  std::mt19937_64 rng(seed);
  std::vector<int64_t> coords(mesh.shape.size());
  // Walks the mesh axes outermost first, handing each sub-block down.
  std::function<void(size_t, const Tensor &)> visit = [&](size_t axis, const Tensor &block) {
    if (axis == mesh.shape.size()) {
      shards[mesh.rankOf(coords)] = block;
      return;
    }
    const Sbp &sbp = layout[axis];
    int64_t p = mesh.shape[axis];
    std::vector<Tensor> parts;
    if (sbp.isPartial())
      parts = decompose(block, p, sbp.reduce, rng);
    for (int64_t c = 0; c < p; ++c) {
      coords[axis] = c;
      visit(axis + 1, sbp.isSplit() ? chunk(block, sbp.dim, c, p) : sbp.isPartial() ? parts[c] : block);
    }
  };
  visit(0, global);
  return shards;
}

Tensor assemble(const Shards &shards, const Mesh &mesh, const NdSbp &layout) {
  std::vector<int64_t> coords(mesh.shape.size());
  // Combines the children of each mesh axis, innermost first.
  std::function<Tensor(size_t)> combine = [&](size_t axis) -> Tensor {
    if (axis == mesh.shape.size())
      return shards[mesh.rankOf(coords)];
    const Sbp &sbp = layout[axis];
    std::vector<Tensor> children;
    for (int64_t c = 0; c < (sbp.isBroadcast() ? 1 : mesh.shape[axis]); ++c) {
      coords[axis] = c;
      children.push_back(combine(axis + 1));
    }
    coords[axis] = 0;
    std::vector<const Tensor *> refs;
    for (const Tensor &t : children)
      refs.push_back(&t);
    if (sbp.isSplit())
      return concat(refs, sbp.dim);
    if (sbp.isPartial())
      return reduce(refs, sbp.reduce);
    return children[0];
  };
  return combine(0);
}

void applyHop(Shards &shards, const Mesh &mesh, const Hop &hop) {
  const Sbp &from = hop.from, &to = hop.to;
  if (from == to)
    return;
  int64_t p = mesh.shape[hop.axis];
  std::vector<bool> done(shards.size(), false);
  for (int64_t rank = 0; rank < static_cast<int64_t>(shards.size()); ++rank) {
    if (done[rank])
      continue;
    std::vector<int64_t> group = mesh.group(rank, hop.axis);
    std::vector<const Tensor *> locals;
    for (int64_t r : group)
      locals.push_back(&shards[r]);
    // The group's tensor that the new locals are cut from: any replica of a
    // broadcast, the gathered splits, or the reduced partials.
    Tensor source = from.isBroadcast() ? *locals[0]
                    : from.isSplit()   ? concat(locals, from.dim)
                                       : reduce(locals, from.reduce);
    std::vector<Tensor> next(p);
    for (int64_t c = 0; c < p; ++c) {
      if (to.isBroadcast())
        next[c] = source;
      else if (to.isSplit())
        next[c] = chunk(source, to.dim, c, p);
      else if (from.isSplit()) // zero-pad: each rank keeps its block, no communication
        next[c] = embed(*locals[c], from.dim, c, p, identityOf(to.reduce));
      else // one rank keeps the value; for max, every rank may
        next[c] = c == 0 || to.reduce == Sbp::Reduce::Max ? source : filled(source, 0.0f);
    }
    for (int64_t c = 0; c < p; ++c) {
      shards[group[c]] = std::move(next[c]);
      done[group[c]] = true;
    }
  }
}

} // namespace sbprt::sim
