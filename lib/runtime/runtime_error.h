// Where cuda_dl.h and nccl_dl.h, which stay at this level until they move
// into cuda/, find the runtime's error type.
#pragma once

#include "cuda/runtime_error.h"
