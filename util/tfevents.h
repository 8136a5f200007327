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
 * events.out.tfevents.<unix time>.<host>.<pid> (NAME.1, NAME.2, ... where that is taken:
 * an earlier life of the same pid in the same second), starting with the file_version
 * record.
 * whole = 0: the file is there from the start and grows (a run's live log); whole = 1: it
 * is written under a temporary name TensorBoard does not read (.tandem-tb.tmp.<pid>.<n>)
 * and appears under its name only at tfevents_close(w, 1) (`tandem metrics
 * --tensorboard`: a full disk or a signal never leaves a cut history that a second try
 * would double). NULL with e set (ERR_USAGE naming the path) when it cannot. */
tfevents *tfevents_open(const char *dir, int whole, tdm_err *e);
/* One scalar: tag at step, wall_time in unix seconds. Kept in memory: tfevents_flush writes
 * everything since the last flush with one write(), so a kill leaves a row (all its
 * records) whole or not at all (a SIGKILL inside the write() of a row past a page can
 * still cut it short: rare, not excluded); a failed write (a full disk) cuts the file back to its
 * last whole record and drops what was pending. */
int tfevents_scalar(tfevents *w, const char *tag, int64_t step, double wall_time, double value,
                    tdm_err *e);
int tfevents_flush(tfevents *w, tdm_err *e);
/* The file's path, for messages (its final name); valid until tfevents_close. */
const char *tfevents_path(const tfevents *w);
/* Flushes and closes. A whole file is put under its name when `keep` (0, or ERR_USAGE
 * naming it when the close or rename fails) and removed otherwise; a live one stays as
 * written. NULL: nothing to do. */
int tfevents_close(tfevents *w, int keep, tdm_err *e);
/* The same, with the name the whole file was put under (NAME.1 where NAME was taken) into
 * name (cap bytes; "" when none was put in place). */
int tfevents_close_named(tfevents *w, int keep, char *name, size_t cap, tdm_err *e);

/* `tandem metrics --tensorboard DIR` (a whole file) names its file
 * events.out.tfevents.<time>.<host>.<pid>.tandem-export: DIR is one TensorBoard run, and
 * a second export there replaces the first rather than doubling every scalar.
 * tfevents_export_check: 0, or ERR_USAGE (e set, naming it) when DIR holds an event file
 * that is no export (a run's live log: the history beside it would double it); a missing
 * DIR is fine. tfevents_export_sweep: removes the exports in DIR other than the file
 * `keep` (the one just written); how many it removed. */
#define TFEVENTS_EXPORT_MARK ".tandem-export"
int tfevents_export_check(const char *dir, tdm_err *e);
int tfevents_export_sweep(const char *dir, const char *keep);

/* CRC-32C (Castagnoli) of n bytes, and TensorFlow's mask of it: exposed for the tests. */
uint32_t tfevents_crc32c(const void *data, size_t n);
uint32_t tfevents_masked_crc(const void *data, size_t n);

#endif
