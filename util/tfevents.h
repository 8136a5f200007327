/* tfevents.h — TensorBoard event files: scalars that TensorBoard and `wandb sync
 * --sync-tensorboard` read (`tandem metrics --tensorboard DIR`, config log.tensorboard).
 *
 * The format is TensorFlow's record file: each record is its length (uint64 little
 * endian), the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the
 * data (mask: rotate right by 15, add 0xa282ead8). Each record's data is an Event
 * protocol buffer: wall_time (field 1, double), step (2, int64) and either file_version
 * (3, "brain.Event:2", the first record of a file) or a Summary (5) holding Values (1)
 * of tag (1, string) and simple_value (2, float). Written by hand: no protobuf library.
 */
#ifndef TANDEM_UTIL_TFEVENTS_H
#define TANDEM_UTIL_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct tfevents tfevents;

/* Creates DIR (and its parents) if missing and a new file in it,
 * events.out.tfevents.<unix time>.<host>.<pid>, starting with the file_version record.
 * NULL with e set (ERR_USAGE naming the path) when it cannot. */
tfevents *tfevents_open(const char *dir, tdm_err *e);
/* One scalar: tag at step, wall_time in unix seconds. Buffered: tfevents_flush writes. */
int tfevents_scalar(tfevents *w, const char *tag, int64_t step, double wall_time, double value,
                    tdm_err *e);
int tfevents_flush(tfevents *w, tdm_err *e);
/* Flushes and closes; the file's path, for messages, stays valid until then. */
const char *tfevents_path(const tfevents *w);
void tfevents_close(tfevents *w);

/* CRC-32C (Castagnoli) of n bytes, and TensorFlow's mask of it: exposed for the tests. */
uint32_t tfevents_crc32c(const void *data, size_t n);
uint32_t tfevents_masked_crc(const void *data, size_t n);

#endif
