// A launch as a value (src/common/kernel_launch.hpp): the arguments it stores are the kernel's parameters, converted
// to their types, each at its alignment, and a copy of the launch carries them along (the storage holds offsets,
// not pointers into itself). Issuing needs a GPU; what it would pass is checked here.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "common/kernel_launch.hpp"

namespace {

struct alignas(64) Map64 {  // as a CUtensorMap: 128 bytes, 64-byte aligned
  unsigned char bytes[128];
};
struct Params {
  const float* p;
  int64_t n;
  float x;
};

void kernel(Map64, int, Params, long, const float*) {}  // the signature only: never called

TEST(KernelLaunch, StoresEachArgumentAsItsParameter) {
  Map64 m;
  for (int i = 0; i < 128; ++i) m.bytes[i] = static_cast<unsigned char>(i * 3);
  const float f = 1.f;
  const Params p{&f, 1ll << 40, 2.5f};
  const short narrow = 7;  // converted to the parameter's int, as a call would
  const int wide = 123;    // to long
  gk::detail::KernelLaunch made("test", kernel, {dim3(3, 2, 4), 256, 1000, true, false}, m, narrow, p, wide, &f);
  const gk::detail::KernelLaunch l = made;  // a copy keeps its arguments
  ASSERT_EQ(l.arg_count(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(l.arg(i)) % (i == 0 ? 64 : 8), 0u) << i;
  }
  EXPECT_EQ(std::memcmp(l.arg(0), &m, sizeof(m)), 0);
  EXPECT_EQ(*static_cast<const int*>(l.arg(1)), 7);
  const Params* q = static_cast<const Params*>(l.arg(2));
  EXPECT_EQ(q->p, &f);
  EXPECT_EQ(q->n, 1ll << 40);
  EXPECT_EQ(q->x, 2.5f);
  EXPECT_EQ(*static_cast<const long*>(l.arg(3)), 123);
  EXPECT_EQ(*static_cast<const float* const*>(l.arg(4)), &f);
  EXPECT_EQ(l.shape().grid.z, 4u);
  EXPECT_EQ(l.shape().smem_bytes, 1000u);
  EXPECT_TRUE(l.shape().cluster_z);
  EXPECT_FALSE(l.empty());
  EXPECT_TRUE(gk::detail::KernelLaunch().empty());
}

TEST(KernelLaunch, GraphNodeParametersAreTheLaunch) {
  const float f = 1.f;
  const gk::detail::KernelLaunch l("test", kernel, {dim3(3, 2, 4), 256, 1000, true, false}, Map64{}, 5,
                                   Params{&f, 9, 0.5f}, 6L, &f);
  void* ptrs[gk::detail::KernelLaunch::kMaxArgs];
  const cudaKernelNodeParams n = l.node_params(ptrs);
  EXPECT_EQ(n.func, reinterpret_cast<void*>(kernel));
  EXPECT_EQ(n.gridDim.x, 3u);
  EXPECT_EQ(n.gridDim.z, 4u);
  EXPECT_EQ(n.blockDim.x, 256u);
  EXPECT_EQ(n.sharedMemBytes, 1000u);
  ASSERT_EQ(n.kernelParams, ptrs);
  for (int i = 0; i < l.arg_count(); ++i) EXPECT_EQ(ptrs[i], l.arg(i)) << i;
}

TEST(KernelLaunch, ProgrammaticIsSetAtIssueTime) {
  gk::detail::KernelLaunch l("test", kernel, {dim3(1), 32}, Map64{}, 0, Params{}, 0L, nullptr);
  EXPECT_FALSE(l.shape().programmatic);
  l.set_programmatic(true);
  EXPECT_TRUE(l.shape().programmatic);
}

}  // namespace
