// <xgrad/optim.h>: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) and learning-rate schedules, as
// torch.optim. Included by <xgrad/xgrad.h>. (Gradient clipping is torch.nn.utils's, so it
// is in <xgrad/nn/clip_grad.h>.)
#pragma once
#include "xgrad/optim/adagrad.h"
#include "xgrad/optim/adam.h"
#include "xgrad/optim/lr_scheduler.h"
#include "xgrad/optim/optimizer.h"
#include "xgrad/optim/rmsprop.h"
#include "xgrad/optim/sgd.h"
