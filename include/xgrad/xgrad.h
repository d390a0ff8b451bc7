// <xgrad/xgrad.h>: the umbrella header. Include this one (and link xgrad::xgrad).
//
// It sits above the layers: core (tensors, autograd, ops), io (save / load in safetensors),
// nn (modules, clipping) and optim (optimizers, schedules), each of which can also be
// included and linked on its own (<xgrad/ops.h> + xgrad::core, <xgrad/io/safetensors.h> +
// xgrad::io, <xgrad/nn.h> + xgrad::nn, <xgrad/optim.h> + xgrad::optim).
#pragma once
#include "xgrad/autocast.h"
#include "xgrad/autograd.h"
#include "xgrad/backend.h"
#include "xgrad/checkpoint.h"
#include "xgrad/data.h"
#include "xgrad/dtype.h"
#include "xgrad/error.h"
#include "xgrad/functional.h"
#include "xgrad/gradcheck.h"
#include "xgrad/io/checkpoint.h"
#include "xgrad/io/safetensors.h"
#include "xgrad/nn.h"
#include "xgrad/ops.h"
#include "xgrad/optim.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"
#include "xgrad/tensor.h"
