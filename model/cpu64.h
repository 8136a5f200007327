/* cpu64.h — the CPU reference backend built in double precision.
 *
 * The same source as model/cpu.c with `real` = double. It exists for tests: a float64
 * finite-difference check of the backward exercises the very code the float backend
 * runs. model_clip_grads is float-only; tests call .norm and .scale directly. */
#ifndef TANDEM_MODEL_CPU64_H
#define TANDEM_MODEL_CPU64_H

#include "model/model.h"

MODEL_OPS_DECLARE(model_ops_f64, double)

extern const model_ops_f64 model_cpu64_ops;

#endif
