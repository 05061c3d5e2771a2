// exec.index_place (dialects/Exec/IR/ExecOps.h): what --sbp-spmdize writes
// the emitter reads back whole, and a malformed one is refused (the emitter
// then fails the op), never half read.
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Sbp/IR/SbpOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

TEST(IndexPlaceAttrTest, RoundTrips) {
  MLIRContext ctx;
  ctx.loadDialect<sbpc::sbp::SbpDialect, sbpc::exec::ExecDialect>();
  sbprt::IndexPlace place;
  place.shape = {4, 8};
  place.slices = {{{4, 1, 8}, {4, 2, 8}, {0, 1, 0}}};
  place.originShape = {8, 8};
  place.origin = "input 'tokens'";
  sbprt::NdSbp layout = {sbprt::Sbp::broadcast(), sbprt::Sbp::split(0)};
  auto parsed = sbpc::exec::parseIndexPlace(sbpc::exec::indexPlaceAttr(&ctx, place, layout));
  ASSERT_TRUE(parsed);
  const auto &[got, gotLayout] = *parsed;
  EXPECT_EQ(place.shape, got.shape);
  ASSERT_EQ(1u, got.slices.size());
  EXPECT_EQ(place.slices[0].result, got.slices[0].result);
  EXPECT_EQ(place.slices[0].source, got.slices[0].source);
  EXPECT_EQ(place.slices[0].starts, got.slices[0].starts);
  EXPECT_EQ(place.originShape, got.originShape);
  EXPECT_EQ(place.origin, got.origin);
  EXPECT_EQ(layout, gotLayout);

  // Computed ids: no origin, no slices.
  sbprt::IndexPlace computed;
  computed.shape = {3};
  parsed = sbpc::exec::parseIndexPlace(
      sbpc::exec::indexPlaceAttr(&ctx, computed, {sbprt::Sbp::broadcast()}));
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->first.origin.empty());
  EXPECT_TRUE(parsed->first.slices.empty());
}

TEST(IndexPlaceAttrTest, RefusesMalformed) {
  MLIRContext ctx;
  ctx.loadDialect<sbpc::sbp::SbpDialect, sbpc::exec::ExecDialect>();
  Builder b(&ctx);
  auto layout = sbpc::sbp::NdSbpAttr::get(&ctx, sbprt::NdSbp{sbprt::Sbp::broadcast()});
  auto shape = b.getDenseI64ArrayAttr({4});
  auto dict = [&](SmallVector<NamedAttribute> entries) { return b.getDictionaryAttr(entries); };
  // No layout; an origin without slices; slices not in threes.
  EXPECT_FALSE(sbpc::exec::parseIndexPlace(dict({b.getNamedAttr("shape", shape)})));
  EXPECT_FALSE(sbpc::exec::parseIndexPlace(
      dict({b.getNamedAttr("shape", shape), b.getNamedAttr("layout", layout),
            b.getNamedAttr("origin", b.getStringAttr("input 'x'")),
            b.getNamedAttr("origin_shape", shape)})));
  EXPECT_FALSE(sbpc::exec::parseIndexPlace(
      dict({b.getNamedAttr("shape", shape), b.getNamedAttr("layout", layout),
            b.getNamedAttr("origin", b.getStringAttr("input 'x'")),
            b.getNamedAttr("origin_shape", shape),
            b.getNamedAttr("slices", b.getArrayAttr({shape, shape}))})));
}

} // namespace
