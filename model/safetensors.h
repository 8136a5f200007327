/* safetensors.h — tensors in Hugging Face's safetensors format, read and written.
 *
 * A file is: 8 bytes, the little-endian length N of a JSON header; N bytes of header, an
 * object mapping each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets into the byte buffer that follows the header) plus an optional
 * "__metadata__" object of strings; then the buffer, little-endian, row-major. A model
 * folder holds one such file (model.safetensors) or several shards named by
 * model.safetensors.index.json ({"weight_map": {tensor: file}}).
 *
 * Reading maps each file read-only and validates the whole header before anything is
 * used: a header that is not one JSON object, a length past the file, an unknown dtype, a
 * shape whose element count does not match the byte range, ranges that overlap, leave
 * holes or run past the buffer, and a name given twice are errors naming the file and
 * the tensor. Values are converted to float32 on request (F32, BF16, F16); other dtypes
 * (integers, F64, F8) can be listed but not converted.
 *
 * Writing takes float32 values and stores each tensor as F32 or BF16 (round to nearest
 * even), 8-byte aligned, with the tensors in the order given; the file is replaced
 * atomically (a temporary file, fsync, rename).
 */
#ifndef TANDEM_MODEL_SAFETENSORS_H
#define TANDEM_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER (100u << 20) /* the reference library's limit on the header */
/* JSON values in a header or an index: a model of 300,000 tensors has ~3.3M (~240 MB
 * parsed); more is no model's header (a 44 MB one of numbers took 1.6 GB) */
#define ST_MAX_VALUES (8u << 20)

typedef enum {
    ST_F32,
    ST_BF16,
    ST_F16,
    ST_F64,
    ST_I64,
    ST_I32,
    ST_I16,
    ST_I8,
    ST_U8,
    ST_BOOL,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_NDTYPES
} st_dtype;

typedef struct st_tensor {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t numel;
    const unsigned char *data; /* inside the file's mapping */
    uint64_t nbytes;
    const char *file; /* the file it lives in (for messages) */
} st_tensor;

typedef struct st_set st_set;

/* Opens `path`: a .safetensors file, or a folder holding model.safetensors.index.json
 * (sharded; every file it names is opened, every tensor it lists must be in the file it
 * names) or else model.safetensors. *out is freed with safetensors_close. ERR_USAGE with
 * a message naming the file (and the tensor) and the problem; ERR_INTERNAL when out of
 * memory. */
int safetensors_open(const char *path, st_set **out, tdm_err *e);
void safetensors_close(st_set *s);

/* The tensors, sorted by name; and one by exact name (NULL when absent). */
size_t safetensors_count(const st_set *s);
const st_tensor *safetensors_at(const st_set *s, size_t i);
const st_tensor *safetensors_find(const st_set *s, const char *name);
/* The "__metadata__" value of `key` in the (first) file, NULL when absent. */
const char *safetensors_meta(const st_set *s, const char *key);
/* 0, or ERR_USAGE naming the tensor and the element when t (F32, BF16, F16) holds a NaN or
 * an infinity, read from the file without a copy (tandem inspect: what a load refuses). */
int safetensors_check_finite(const st_tensor *t, tdm_err *e);
/* Whether a and b hold the same values (as floats: a BF16 copy of an F32 tensor is equal
 * only where its values are). */
int safetensors_same_values(const st_tensor *a, const st_tensor *b);
/* What it was opened from: the .safetensors file, or the folder's index, for messages. */
const char *safetensors_source(const st_set *s);

/* "F32", "BF16", ...: the format's own names. */
const char *safetensors_dtype_name(st_dtype d);
/* Bytes per element of d. */
size_t safetensors_dtype_size(st_dtype d);

/* t's numel values as float32 into out. ERR_USAGE naming the tensor for a dtype that is
 * not F32, BF16 or F16. */
int safetensors_to_f32(const st_tensor *t, float *out, tdm_err *e);

/* One tensor to write: float32 values stored as `dtype` (ST_F32 or ST_BF16). */
typedef struct st_out {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const float *data;
} st_out;

/* Writes n tensors (names unique, at least one) to `path`, with metadata pairs
 * meta[0..2*nmeta) (key, value strings; may be 0) as "__metadata__". ERR_USAGE for a bad
 * tensor description or a failed write, naming the path. */
int safetensors_write(const char *path, const st_out *t, size_t n, const char *const *meta, size_t nmeta,
                      tdm_err *e);

/* float32 → bfloat16 bits, round to nearest even (NaN stays NaN). */
uint16_t safetensors_f32_to_bf16(float f);

#endif
