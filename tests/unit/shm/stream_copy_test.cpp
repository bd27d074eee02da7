// The streaming copy the FIFO uses with WEFT_SHM_STREAM=1, against memcpy.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "base/stream_copy.h"

namespace weft {
namespace {

TEST(StreamCopy, EqualsMemcpyAtEveryAlignmentAndLengthAndWritesNothingElse) {
  std::vector<unsigned char> src(40000), dst(40100), want(40100);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t soff : {0, 1, 5, 8, 15}) {
    for (size_t doff : {0, 1, 3, 8, 16, 17}) {
      for (size_t len : {0, 1, 15, 16, 17, 63, 64, 65, 127, 129, 200, 32768, 32768 + 7, 39000}) {
        std::memset(dst.data(), 0xA5, dst.size());
        want = dst;
        std::memcpy(want.data() + doff, src.data() + soff, len);
        stream_copy(dst.data() + doff, src.data() + soff, len);
        ASSERT_EQ(want, dst) << "src offset " << soff << ", dst offset " << doff << ", " << len << " bytes";
      }
    }
  }
}

}  // namespace
}  // namespace weft
