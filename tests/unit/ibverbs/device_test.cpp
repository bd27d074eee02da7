// WEFT_IB_HCA matching, and the answer on a machine without RDMA hardware:
// no device, so the transport steps aside with a reason.
#include <gtest/gtest.h>

#include "transports/ibverbs/device.h"

namespace weft::ib {
namespace {

TEST(Device, HcaSpecFollowsNcclSyntax) {
  EXPECT_TRUE(hca_matches("", "mlx5_0", 1));
  EXPECT_TRUE(hca_matches("mlx5", "mlx5_3", 2));
  EXPECT_TRUE(hca_matches("mlx5_0:1,mlx5_1", "mlx5_0", 1));
  EXPECT_FALSE(hca_matches("mlx5_0:1,mlx5_1", "mlx5_0", 2));
  EXPECT_TRUE(hca_matches("mlx5_0:1,mlx5_1", "mlx5_1", 2));
  EXPECT_FALSE(hca_matches("=mlx5_1", "mlx5_10", 1));
  EXPECT_TRUE(hca_matches("=mlx5_1", "mlx5_1", 1));
  EXPECT_FALSE(hca_matches("^mlx5_1", "mlx5_1", 1));
  EXPECT_TRUE(hca_matches("^mlx5_1", "mlx4_0", 1));
}

// Two dual-port cards and a RoCE port, one card per NUMA node.
TEST(Device, NearestPortFollowsTheRanksNumaNode) {
  const std::vector<Device> ports = {{"mlx5_0", 1, false, 0}, {"mlx5_0", 2, false, 0}, {"mlx5_1", 1, false, 1},
                                     {"mlx5_1", 2, false, 1}, {"rocep9s0", 1, true, -1}};
  EXPECT_EQ(nearest_port(ports, 0), 0u);
  EXPECT_EQ(nearest_port(ports, 1), 2u);
  EXPECT_EQ(nearest_port(ports, -1), 0u);  // unbound: the first
  EXPECT_EQ(nearest_port(ports, 3), 0u);   // no port on that node: the first
  // WEFT_IB_HCA left only the far card and the RoCE port: the first of them.
  EXPECT_EQ(nearest_port({ports[2], ports[4]}, 0), 0u);
}

TEST(Device, WithoutHardwareCanConnectSaysWhy) {
  Device d;
  std::string why;
  if (find_device("", &d, &why)) GTEST_SKIP() << "this machine has an RDMA device: " << d.name;
  EXPECT_NE(why.find("no "), std::string::npos) << why;
  std::string reason;
  EXPECT_FALSE(can_connect(&reason));
  EXPECT_FALSE(reason.empty());
}

}  // namespace
}  // namespace weft::ib
