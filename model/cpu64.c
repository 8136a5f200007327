/* cpu64.c — model/cpu.c compiled with real = double (see model/cpu64.h). */
#define MODEL_CPU_DOUBLE 1
#include "model/cpu.c"
