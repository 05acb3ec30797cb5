#pragma once
// nano's runtime in one include: context (init), communicators, DistributedDataParallel,
// auto_lr warm-up, data sharding, checkpoints, and in-program launching (nano::TorchNano,
// nano::nano).
#include <nano/auto_checkpoint.h>
#include <nano/auto_lr.h>
#include <nano/checkpoint.h>
#include <nano/communicator.h>
#include <nano/context.h>
#include <nano/ddp.h>
#include <nano/nano_wrapper.h>
#include <nano/sharding.h>
#include <nano/torch_nano.h>
