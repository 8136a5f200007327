/* presets.h — the named bundles of config values (`preset: NAME`), as data.
 *
 * Each is a YAML file under configs/presets/ in the config's own sections, embedded into
 * the binary at build time (scripts/embed_presets.sh writes build/gen/presets.c), so the
 * file a user reads is the bundle tandem applies. config/config.c applies them and
 * derives --help's and docs/config.md's preset table from them. */
#ifndef TANDEM_CONFIG_PRESETS_H
#define TANDEM_CONFIG_PRESETS_H

#include <stddef.h>

typedef struct config_preset_src {
    const char *name; /* the file name without .yaml; NULL ends the table */
    const char *doc;  /* its first line after "# NAME: " */
    const char *text; /* the YAML, NUL-terminated */
    size_t len;
} config_preset_src;

/* Sorted by name, ended by a row of NULLs. */
extern const config_preset_src config_preset_srcs[];

#endif
