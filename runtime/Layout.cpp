// Meshes and SBP layouts.
#include "runtime/Layout.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

namespace sbprt {

std::string Sbp::str() const {
  switch (kind) {
  case Kind::Broadcast:
    return "B";
  case Kind::Split:
    return "S(" + std::to_string(dim) + ")";
  case Kind::Partial:
    return reduce == Reduce::Sum ? "P(sum)" : "P(max)";
  }
  return "?";
}

std::string toString(const NdSbp &layout) {
  std::string text = "[";
  for (size_t i = 0; i < layout.size(); ++i)
    text += (i ? ", " : "") + layout[i].str();
  return text + "]";
}

std::optional<NdSbp> parseLayout(const std::string &text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    return std::nullopt;
  NdSbp layout;
  std::stringstream entries(text.substr(1, text.size() - 2));
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    entry.erase(0, entry.find_first_not_of(' '));
    entry.erase(entry.find_last_not_of(' ') + 1);
    if (entry == "B")
      layout.push_back(Sbp::broadcast());
    else if (entry == "P(sum)")
      layout.push_back(Sbp::partial(Sbp::Reduce::Sum));
    else if (entry == "P(max)")
      layout.push_back(Sbp::partial(Sbp::Reduce::Max));
    else if (entry.size() > 3 && entry.size() < 12 && entry.compare(0, 2, "S(") == 0 &&
             entry.back() == ')' && entry.find_first_not_of("0123456789", 2) == entry.size() - 1)
      layout.push_back(Sbp::split(std::stoll(entry.substr(2, entry.size() - 3)))); // < 10^9
    else
      return std::nullopt;
  }
  return layout;
}

int64_t Mesh::numDevices() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

std::vector<int64_t> Mesh::coordinates(int64_t rank) const {
  std::vector<int64_t> coords(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    coords[i] = rank % shape[i];
    rank /= shape[i];
  }
  return coords;
}

int64_t Mesh::rankOf(const std::vector<int64_t> &coords) const {
  int64_t rank = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    rank = rank * shape[i] + coords[i];
  return rank;
}

std::vector<int64_t> Mesh::group(int64_t rank, size_t axis) const {
  std::vector<int64_t> coords = coordinates(rank), ranks;
  for (int64_t c = 0; c < shape[axis]; ++c) {
    coords[axis] = c;
    ranks.push_back(rankOf(coords));
  }
  return ranks;
}

int64_t Mesh::replicaWriter(const std::string &name, size_t axis) const {
  if (isPipelineAxis(axis) || shape[axis] <= 1)
    return 0;
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : name)
    hash = (hash ^ c) * 1099511628211ull;
  return static_cast<int64_t>(hash % static_cast<uint64_t>(shape[axis]));
}

bool mixesPartials(const NdSbp &layout) {
  bool sum = false, max = false;
  for (const Sbp &s : layout) {
    sum |= s.isPartial() && s.reduce == Sbp::Reduce::Sum;
    max |= s.isPartial() && s.reduce == Sbp::Reduce::Max;
  }
  return sum && max;
}

Collective collectiveOf(const Sbp &from, const Sbp &to) {
  if (from == to)
    return Collective::None;
  if (from.isSplit())
    return to.isBroadcast() ? Collective::AllGather
           : to.isSplit()   ? Collective::AllToAll
                            : Collective::LocalZeroPad;
  if (from.isPartial())
    return to.isSplit() ? Collective::ReduceScatter : Collective::AllReduce;
  return to.isSplit() ? Collective::LocalSlice : Collective::LocalKeepOne;
}

const char *collectiveName(Collective collective) {
  switch (collective) {
  case Collective::None:
    return "none";
  case Collective::AllGather:
    return "all-gather";
  case Collective::AllToAll:
    return "all-to-all";
  case Collective::AllReduce:
    return "all-reduce";
  case Collective::ReduceScatter:
    return "reduce-scatter";
  case Collective::LocalSlice:
    return "local-slice";
  case Collective::LocalZeroPad:
    return "local-zero-pad";
  case Collective::LocalKeepOne:
    return "local-keep-one";
  }
  return "?";
}

bool isDirectHop(const NdSbp &current, const Hop &hop) {
  for (size_t k = hop.axis + 1; k < current.size(); ++k)
    if (current[k].isSplit() && ((hop.from.isSplit() && current[k].dim == hop.from.dim) ||
                                 (hop.to.isSplit() && current[k].dim == hop.to.dim)))
      return false;
  return true;
}

std::string checkMesh(const Mesh &mesh) {
  if (mesh.axes.empty())
    return "needs at least one axis";
  if (mesh.axes.size() != mesh.shape.size())
    return "has " + std::to_string(mesh.axes.size()) + " axis names but " +
           std::to_string(mesh.shape.size()) + " sizes";
  if (mesh.axes.size() > kMaxAxes)
    return "has " + std::to_string(mesh.axes.size()) + " axes, more than the " +
           std::to_string(kMaxAxes) + " sbpc lays out";
  int64_t devices = 1;
  for (size_t i = 0; i < mesh.axes.size(); ++i) {
    if (mesh.axes[i].empty())
      return "axis names must be non-empty";
    // Axis names reach generated programs, file names and reports.
    const std::string &name = mesh.axes[i];
    auto wordChar = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    if (!std::all_of(name.begin(), name.end(), wordChar)) {
      std::string shown;
      for (char c : name) {
        unsigned char u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) {
          char hex[4];
          std::snprintf(hex, sizeof hex, "\\%02X", u);
          shown += hex;
        } else {
          shown += c;
        }
      }
      return "axis name '" + shown + "' must be letters, digits and '_'";
    }
    for (size_t j = 0; j < i; ++j)
      if (mesh.axes[j] == mesh.axes[i])
        return "axis '" + mesh.axes[i] + "' is named twice";
    if (mesh.shape[i] < 1)
      return "axis '" + mesh.axes[i] + "' has size " + std::to_string(mesh.shape[i]) +
             ", expected at least 1";
    if (mesh.shape[i] > kMaxDevices / devices)
      return "has more than " + std::to_string(kMaxDevices) + " devices";
    devices *= mesh.shape[i];
  }
  return "";
}

std::vector<int64_t> splitFactors(const Mesh &mesh, const NdSbp &layout, size_t rank) {
  std::vector<int64_t> factors(rank, 1);
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i].isSplit() && layout[i].dim < static_cast<int64_t>(rank))
      factors[layout[i].dim] *= mesh.shape[i];
  return factors;
}

bool layoutFits(const Mesh &mesh, const NdSbp &layout, const std::vector<int64_t> &shape,
                bool isFloat) {
  if (layout.size() != mesh.shape.size() || mixesPartials(layout))
    return false;
  int64_t factors[16] = {};
  if (shape.size() > 16)
    return checkLayout(mesh, layout, shape, isFloat).empty();
  std::fill(factors, factors + shape.size(), 1);
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].isPartial() && !isFloat)
      return false;
    if (!layout[i].isSplit())
      continue;
    if (layout[i].dim >= static_cast<int64_t>(shape.size()))
      return false;
    factors[layout[i].dim] *= mesh.shape[i];
  }
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] % factors[d] != 0)
      return false;
  return true;
}

std::string checkLayout(const Mesh &mesh, const NdSbp &layout, const std::vector<int64_t> &shape,
                        bool isFloat) {
  std::ostringstream os;
  if (layout.size() != mesh.shape.size()) {
    os << layout.size() << (layout.size() == 1 ? " entry" : " entries") << " for a mesh of "
       << mesh.shape.size() << (mesh.shape.size() == 1 ? " axis" : " axes");
    return os.str();
  }
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i].isSplit() && layout[i].dim >= static_cast<int64_t>(shape.size())) {
      os << layout[i].str() << " on mesh axis '" << mesh.axes[i] << "' splits dimension "
         << layout[i].dim << " of a rank-" << shape.size() << " tensor";
      return os.str();
    }
  // Sums of maxima are not maxima of sums: no op produces such a layout and
  // no per-axis collective could change it soundly.
  if (mixesPartials(layout))
    return "P(sum) and P(max) cannot be mixed";
  if (!isFloat && std::any_of(layout.begin(), layout.end(), [](const Sbp &s) { return s.isPartial(); }))
    return "a partial layout needs a floating-point tensor";
  std::vector<int64_t> factors = splitFactors(mesh, layout, shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] % factors[d] != 0) {
      std::string axes;
      for (size_t i = 0; i < layout.size(); ++i)
        if (layout[i].isSplit() && layout[i].dim == static_cast<int64_t>(d))
          axes += (axes.empty() ? "'" : " x '") + mesh.axes[i] + "'";
      os << "dimension " << d << " of size " << shape[d] << " is not divisible by mesh axis "
         << axes << " of size " << factors[d];
      return os.str();
    }
  return "";
}

Block blockOf(const Mesh &mesh, const NdSbp &layout, const std::vector<int64_t> &shape,
              int64_t rank) {
  Block block{std::vector<int64_t>(shape.size(), 0), shape};
  std::vector<int64_t> coords = mesh.coordinates(rank);
  // Axis 0 splits first (outermost); each later axis splits what is left.
  for (size_t i = 0; i < layout.size(); ++i) {
    if (!layout[i].isSplit())
      continue;
    int64_t d = layout[i].dim;
    block.sizes[d] /= mesh.shape[i];
    block.offsets[d] += coords[i] * block.sizes[d];
  }
  return block;
}

namespace {

std::vector<int64_t> unflatten(int64_t position, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0 && shape[d] > 0;) {
    index[d] = position % shape[d];
    position /= shape[d];
  }
  return index;
}

int64_t flatten(const std::vector<int64_t> &index, const std::vector<int64_t> &shape) {
  int64_t position = 0;
  for (size_t d = 0; d < shape.size() && d < index.size(); ++d)
    position = position * shape[d] + index[d];
  return position;
}

} // namespace

std::string IndexPlace::describe(int64_t position) const {
  if (block.empty() && shape.empty() && origin.empty())
    return "position " + std::to_string(position);
  const std::vector<int64_t> &global = shape.empty() ? block : shape;
  std::vector<int64_t> index = unflatten(position, block);
  for (size_t d = 0; d < offsets.size() && d < index.size(); ++d)
    index[d] += offsets[d];
  int64_t flat = flatten(index, global);
  for (const Slice &slice : slices) {
    index = unflatten(flat, slice.result);
    for (size_t d = 0; d < slice.starts.size() && d < index.size(); ++d)
      index[d] += slice.starts[d];
    flat = flatten(index, slice.source);
  }
  index = unflatten(flat, originShape.empty() ? global : originShape);
  if (index.empty()) // one id, a scalar
    return origin.empty() ? "position 0" : origin;
  std::string text = "[";
  for (size_t d = 0; d < index.size(); ++d)
    text += (d ? ", " : "") + std::to_string(index[d]);
  text += "]";
  if (!origin.empty())
    text += " of " + origin;
  return text;
}

std::string IndexPlace::outOfRange(const char *what, int64_t value, int64_t position,
                                   int64_t limit, const char *unit) const {
  return std::string(what) + " " + std::to_string(value) + " at " + describe(position) +
         " is out of range for " + std::to_string(limit) + " " + unit;
}

} // namespace sbprt
