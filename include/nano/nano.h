#pragma once
// nano's runtime in one include: context (init), communicators, DistributedDataParallel,
// auto_lr warm-up, data sharding, checkpoints, and in-program launching (nano::TorchNano,
// nano::nano).
#include "runtime/auto_checkpoint.h"
#include "runtime/auto_lr.h"
#include "runtime/checkpoint.h"
#include "runtime/communicator.h"
#include "runtime/context.h"
#include "runtime/ddp.h"
#include "runtime/gloo_communicator.h"
#include "runtime/mpi_communicator.h"
#include "runtime/nano_wrapper.h"
#include "runtime/sharding.h"
#include "runtime/torch_nano.h"
