/* fileio.h — the durable-write primitives shared by the shard writer and the file store.
 *
 * Durability on POSIX file systems: write a temporary file, fsync it, rename (or link)
 * it onto its name, then fsync the directory so the new name itself survives a crash. */
#ifndef TANDEM_UTIL_FILEIO_H
#define TANDEM_UTIL_FILEIO_H

#include <stddef.h>

/* Writes all n bytes (retrying on EINTR and short writes). 0, or -1 with errno set. */
int fileio_write_all(int fd, const void *data, size_t n);

/* fsync of the directory `dir`. Filesystems that cannot fsync a directory (EINVAL) count
 * as success. 0, or -1 with errno set. */
int fileio_fsync_dir(const char *dir);

/* fsync of the directory that contains `path` ("." when it has no '/'). */
int fileio_fsync_parent(const char *path);

/* Creates the missing parent directories of `path` (mkdir -p of everything before its
 * last '/'), fsyncing the parent of each directory it creates. `path` is modified
 * temporarily and restored. 0, or -1 with errno set. */
int fileio_make_parents(char *path);

/* Opens `path` for reading only if it is a regular file, never blocking on the way: a FIFO
 * (or a device) would block open() until a writer came — a config or shard that is one
 * is refused at once instead (errno EINVAL, return -1). The descriptor is blocking again
 * for the reads. -1 with errno set otherwise (ENOENT, EACCES, ...). */
int fileio_open_regular(const char *path);

/* The process's umask, read without changing it (/proc/self/status; else umask(2) twice,
 * which is only safe before threads start). */
unsigned fileio_umask(void);

/* The real path (realpath, PATH_MAX bytes in out) of the deepest folder of `path` that
 * exists: path itself when it does, else its parent, and so on up to "." or "/" (a folder
 * a command will create is judged by where it will be made). 1, or 0 when none resolves. */
int fileio_existing_ancestor(const char *path, char *out);

/* Like fileio_make_parents, but each directory it creates gets exactly `mode` (chmod
 * after mkdir, so the umask does not widen or narrow it); existing ones are left alone. */
int fileio_make_parents_mode(char *path, unsigned mode);

/* Removes what a killed writer of this program left in `dir`: files named NAME.tmp.PID.N
 * (the shard writer, prep) or NAME.tmp-PID (safetensors) where ours(NAME) says NAME is a
 * file the caller writes there, PID is no live process on this machine, and the file was
 * last written min_age_s seconds ago or more (a writer on another machine or in another
 * PID namespace sharing the folder keeps its file fresh). Returns how many it removed; a
 * folder that cannot be read removes nothing. */
size_t fileio_sweep_dead_temporaries(const char *dir, int (*ours)(const char *name, size_t len),
                                     double min_age_s);

struct buf_t;
/* Appends the whole file at `path` to `out` (util/buf.h), at most `max` bytes of it. 0, or
 * -1 with errno set (EFBIG: longer than max; ENOMEM: out of memory). */
int fileio_read_all(const char *path, struct buf_t *out, size_t max);

/* What an errno from the two above means, for a message: EINVAL is "not a regular file (a
 * FIFO, a device or a directory?)", the rest strerror's text. */
const char *fileio_strerror(int err);

#endif
