// <xgrad/data.h>: xgrad::data, torch.utils.data for map-style datasets (xgrad::data): datasets
// (dataset.h), samplers (sampler.h) and the DataLoader with its default collate
// (dataloader.h).
#pragma once
#include "xgrad/data/batch_stream.h"
#include "xgrad/data/dataloader.h"
#include "xgrad/data/dataset.h"
#include "xgrad/data/sampler.h"
