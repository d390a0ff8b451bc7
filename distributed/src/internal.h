// distributed/src/internal.h: helpers shared by the collectives and the DDP reducer.
#pragma once
#include "xgrad/tensor.h"

namespace xgrad::distributed {
// In place on a contiguous float32/float64 tensor: x /= get_world_size().
void divide_by_world_size(Tensor& contiguous);
}  // namespace xgrad::distributed
