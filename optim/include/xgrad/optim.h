// <xgrad/optim.h>: optimizers (SGD, Adam, AdamW), learning-rate schedules and gradient
// clipping, as torch.optim / torch.nn.utils.clip_grad_*. Included by <xgrad/xgrad.h>.
#pragma once
#include "xgrad/optim/optimizer.h"
#include "xgrad/optim/sgd.h"
#include "xgrad/optim/adam.h"
#include "xgrad/optim/lr_scheduler.h"
#include "xgrad/optim/clip.h"
