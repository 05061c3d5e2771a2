// Device meshes and SBP layouts as plain data: which part of a global tensor
// each rank holds. Shared by the compiler (costs, boxing plans) and the
// runtime (sharded loading, assembling outputs); no MLIR here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sbprt {

/// The layout of a tensor on one mesh axis.
struct Sbp {
  enum class Kind { Broadcast, Split, Partial };
  enum class Reduce { Sum, Max };
  Kind kind = Kind::Broadcast;
  int64_t dim = 0;             // Split only
  Reduce reduce = Reduce::Sum; // Partial only

  static Sbp broadcast() { return {}; }
  static Sbp split(int64_t dim) { return {Kind::Split, dim, Reduce::Sum}; }
  static Sbp partial(Reduce reduce = Reduce::Sum) { return {Kind::Partial, 0, reduce}; }
  bool isBroadcast() const { return kind == Kind::Broadcast; }
  bool isSplit() const { return kind == Kind::Split; }
  bool isPartial() const { return kind == Kind::Partial; }
  bool operator==(const Sbp &o) const {
    return kind == o.kind && (kind != Kind::Split || dim == o.dim) &&
           (kind != Kind::Partial || reduce == o.reduce);
  }
  bool operator!=(const Sbp &o) const { return !(*this == o); }
  /// "B", "S(1)", "P(sum)".
  std::string str() const;
};

/// One Sbp per mesh axis.
using NdSbp = std::vector<Sbp>;
/// "[S(0), B]".
std::string toString(const NdSbp &layout);
/// The layout `toString` wrote ("[S(0), P(sum)]"), or nullopt.
std::optional<NdSbp> parseLayout(const std::string &text);

/// The name of a pipeline's axis (Mesh::isPipelineAxis).
inline constexpr char kPipelineAxis[] = "pp";

/// An N-D mesh of devices; rank r has row-major coordinates (axis 0 outermost).
struct Mesh {
  std::vector<std::string> axes;
  std::vector<int64_t> shape;

  int64_t numDevices() const;
  std::vector<int64_t> coordinates(int64_t rank) const;
  int64_t rankOf(const std::vector<int64_t> &coordinates) const;
  /// The ranks that differ from `rank` only along `axis`, in axis order.
  std::vector<int64_t> group(int64_t rank, size_t axis) const;
  /// Whether `axis` is a pipeline's (the first, named "pp"): its
  /// coordinates are stages, each with its own program, and a value one
  /// stage holds (laid out B on it) has no replica on the others.
  bool isPipelineAxis(size_t axis) const {
    return axis == 0 && !axes.empty() && axes[0] == kPipelineAxis;
  }
  /// The coordinate on `axis` whose ranks write output `name`'s replica
  /// where the output is laid out B on that axis: spread over the axis by
  /// the name (its FNV-1a hash), so that the ranks of a data-parallel
  /// step share the writing of the parameters they all hold, where rank 0
  /// wrote them all and the others waited for it at their next collective.
  /// A pipeline's axis: 0, the stage's first coordinate (a stage's value
  /// has no replica on the others).
  int64_t replicaWriter(const std::string &name, size_t axis) const;
};

/// Whether `layout` has both P(sum) and P(max) (which no sound per-axis
/// boxing can change).
bool mixesPartials(const NdSbp &layout);

/// One step of a boxing: changes the layout on mesh axis `axis` only.
struct Hop {
  size_t axis;
  Sbp from, to;
};

/// What a hop does on its axis's groups (DESIGN.md §4).
enum class Collective {
  None,
  AllGather,     // S -> B
  AllToAll,      // S(i) -> S(j)
  AllReduce,     // P -> B, or P of the other kind
  ReduceScatter, // P -> S
  LocalSlice,    // B -> S: no communication
  LocalZeroPad,  // S -> P: no communication
  LocalKeepOne,  // B -> P: no communication
};
Collective collectiveOf(const Sbp &from, const Sbp &to);
/// "all-gather", "local-slice", ...
const char *collectiveName(Collective collective);

/// Whether `hop` can run as one collective on the axis's groups when the
/// tensor is laid out as `current`: no later (inner) mesh axis may split a
/// dimension the hop splits or gathers, or the groups' blocks would not be
/// contiguous.
bool isDirectHop(const NdSbp &current, const Hop &hop);

/// The most devices a mesh may have: far beyond any cluster, small enough
/// that products of mesh sizes never overflow.
constexpr int64_t kMaxDevices = int64_t(1) << 24;

/// The most axes a mesh may have: every axis multiplies the layouts of
/// each tensor that signatures and searches enumerate (a fifth axis makes
/// even a tiny model's search take seconds, a sixth minutes), and real
/// meshes use two or three (data, tensor, pipeline).
constexpr size_t kMaxAxes = 4;

/// Empty when `mesh` is well formed (one to kMaxAxes axes, unique non-empty
/// names, sizes >= 1, at most kMaxDevices devices); otherwise what is wrong.
std::string checkMesh(const Mesh &mesh);

/// How many parts each tensor dimension is split into by `layout`.
std::vector<int64_t> splitFactors(const Mesh &mesh, const NdSbp &layout, size_t rank);

/// Empty when `layout` fits a tensor of `shape` on `mesh` (one entry per
/// axis, split dimensions in range and divisible, not both P(sum) and
/// P(max)); otherwise what is wrong, worded to follow "layout L: ".
/// Whether checkLayout would find nothing wrong; allocation-free, for the
/// planner's inner loop.
bool layoutFits(const Mesh &mesh, const NdSbp &layout, const std::vector<int64_t> &shape,
                bool isFloat = true);

/// Partial layouts need a floating-point tensor (`isFloat`): indices do not
/// add up.
std::string checkLayout(const Mesh &mesh, const NdSbp &layout, const std::vector<int64_t> &shape,
                        bool isFloat = true);

/// The block of the global tensor that a rank holds: for each dimension,
/// where it starts and how long it is. Splits nest in mesh-axis order (axis 0
/// outermost), as the ranks' row-major order does. Partial layouts hold the
/// full shape.
struct Block {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
};
Block blockOf(const Mesh &mesh, const NdSbp &layout, const std::vector<int64_t> &shape,
              int64_t rank);

/// Where the ids a rank checks (embedding indices, cross-entropy targets)
/// lie in what the user gave, so that a bad id is named by its place there
/// ("[3, 5] of input 'tokens'"), not by its position in the rank's block.
struct IndexPlace {
  /// A graph.slice between the ids and their input: a position in its
  /// result (of shape `result`) is `starts` further along each dimension
  /// in its source (of shape `source`). Reshapes keep row-major positions.
  struct Slice {
    std::vector<int64_t> result, source, starts;
  };
  std::vector<int64_t> block;       // the shape of the rank's block of the ids
  std::vector<int64_t> offsets;     // where the block starts in them (empty: at 0)
  std::vector<int64_t> shape;       // their global shape (empty: the block's)
  std::vector<Slice> slices;        // from the ids back to `origin`, nearest first
  std::vector<int64_t> originShape; // the shape of `origin` (empty: `shape`)
  std::string origin;               // "input 'tokens'", or empty when not an input

  /// "[3, 5] of input 'tokens'": where the block's element `position`
  /// (row-major) lies; "input 'x'" for a scalar input's one id; "position
  /// N" when nothing is known of the place (all empty).
  std::string describe(int64_t position) const;
  /// "index 77 at [3, 5] of input 'tokens' is out of range for 50 table
  /// rows": id `value`, the block's element `position`, not in [0, limit).
  std::string outOfRange(const char *what, int64_t value, int64_t position, int64_t limit,
                         const char *unit) const;
};

} // namespace sbprt
