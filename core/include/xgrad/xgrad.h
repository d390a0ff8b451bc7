// <xgrad/xgrad.h>: the umbrella header. Include this one.
#pragma once
#include "xgrad/dtype.h"
#include "xgrad/error.h"
#include "xgrad/tensor.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/random.h"
#include "xgrad/gradcheck.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"
#include "xgrad/backend.h"
#include "xgrad/nn.h"
#include "xgrad/optim.h"
