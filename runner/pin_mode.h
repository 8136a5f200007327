/* pin_mode.h — how a start treats an input's pin in the store (data.mp, model.mp). */
#ifndef TANDEM_RUNNER_PIN_MODE_H
#define TANDEM_RUNNER_PIN_MODE_H

/* PIN_READ: compared only (eval, export: nothing written, none there is no fault).
 * PIN_CHECK: judged as PIN_WRITE would judge it, nothing written: a start's look before it
 *   takes the lease, so that a refusal (exit 2) comes before a live writer is taken over
 *   and a writer that then fails to take the lease has written nothing.
 * PIN_WRITE: judged, and written (missing, damaged, or following the input) under the lease:
 *   the lease is checked right before each write. */
typedef enum { PIN_READ = 0, PIN_WRITE = 1, PIN_CHECK = 2 } pin_mode;

#endif
