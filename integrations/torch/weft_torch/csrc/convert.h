// torch's dtypes and reduce ops in weft's terms.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "weft/weft.h"

namespace weft_torch {

// The weft datatype of a tensor's elements; throws for one weft has no type for.
// bool is carried as uint8 (0 or 1).
weftDataType_t weft_dtype(at::ScalarType type, const char* what);

// The weft op for a c10d reduce op on this dtype. PREMUL_SUM creates a
// pre-multiplied sum on comm: *premul is set and the caller destroys it when
// the operation is done. Booleans reduce logically (SUM and MAX are or,
// PRODUCT and MIN are and), as gloo computes them.
weftRedOp_t weft_op(const c10d::ReduceOp& op, at::ScalarType type, weftComm_t comm, const char* what,
                    bool* premul);

}  // namespace weft_torch
