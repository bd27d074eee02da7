#include "convert.h"

#include <c10/util/Exception.h>

#include <cstring>

namespace weft_torch {

weftDataType_t weft_dtype(at::ScalarType type, const char* what) {
  switch (type) {
    case at::kFloat:
      return weftFloat32;
    case at::kDouble:
      return weftFloat64;
    case at::kHalf:
      return weftFloat16;
    case at::kBFloat16:
      return weftBfloat16;
    case at::kFloat8_e4m3fn:
      return weftFloat8e4m3;
    case at::kFloat8_e5m2:
      return weftFloat8e5m2;
    case at::kChar:
      return weftInt8;
    case at::kByte:
    case at::kBool:
      return weftUint8;
    case at::kInt:
      return weftInt32;
    case at::kLong:
      return weftInt64;
    case at::kUInt32:
      return weftUint32;
    case at::kUInt64:
      return weftUint64;
    default:
      TORCH_CHECK(false, "weft ", what, ": unsupported dtype ", c10::toString(type),
                  " (float32, float64, float16, bfloat16, float8_e4m3fn, float8_e5m2, int8, uint8, int32, int64, uint32,"
                  " uint64, bool)");
  }
}

namespace {

// One element of the tensor's dtype holding factor, for weftRedOpCreatePreMulSum.
void scalar_bytes(double factor, at::ScalarType type, unsigned char out[8]) {
  at::Tensor t = at::scalar_tensor(factor, at::TensorOptions().dtype(at::kDouble)).to(type);
  std::memcpy(out, t.data_ptr(), t.element_size());
}

}  // namespace

weftRedOp_t weft_op(const c10d::ReduceOp& op, at::ScalarType type, weftComm_t comm, const char* what, bool* premul) {
  *premul = false;
  const bool boolean = type == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return boolean ? weftMax : weftSum;
    case c10d::ReduceOp::PRODUCT:
      return boolean ? weftMin : weftProd;
    case c10d::ReduceOp::MIN:
      return weftMin;
    case c10d::ReduceOp::MAX:
      return weftMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!boolean, "weft ", what, ": AVG of a bool tensor");
      return weftAvg;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(!at::isFloatingType(type), "weft ", what, ": bitwise reduce op on floating-point dtype ",
                  c10::toString(type));
      return op.op_ == c10d::ReduceOp::BAND ? weftBand : op.op_ == c10d::ReduceOp::BOR ? weftBor : weftBxor;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(!boolean, "weft ", what, ": PREMUL_SUM of a bool tensor");
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(sup != nullptr, "weft ", what, ": PREMUL_SUM without its factor");
      double factor = sup->tensor_factor.defined() ? sup->tensor_factor.item<double>() : sup->double_factor;
      unsigned char scalar[8];
      scalar_bytes(factor, type, scalar);
      weftRedOp_t out;
      weftResult_t rc = weftRedOpCreatePreMulSum(&out, scalar, weft_dtype(type, what), weftScalarHostImmediate, comm);
      TORCH_CHECK(rc == weftSuccess, "weft ", what, ": ", weftGetLastError(comm));
      *premul = true;
      return out;
    }
    default:
      TORCH_CHECK(false, "weft ", what, ": unsupported reduce op ", static_cast<int>(op.op_));
  }
}

}  // namespace weft_torch
