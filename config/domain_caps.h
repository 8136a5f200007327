/* domain_caps.h — data.max_epochs: the most epochs of its train tokens that a run's u may
 * see of a domain (steps/mixture.h says what a cap does to α and to the batches).
 *
 * The value is a list "NAME=EPOCHS,NAME=EPOCHS,..." where NAME is a domain of the dataset
 * or "*" (every domain not named), EPOCHS a positive number; "" = no caps. In YAML:
 *   data: {max_epochs: "kern=4,fortune=4"}     or  --set data.max_epochs='*=8,prose=2'
 */
#ifndef TANDEM_CONFIG_DOMAIN_CAPS_H
#define TANDEM_CONFIG_DOMAIN_CAPS_H

#include <stdbool.h>
#include <stddef.h>

#include "data/dataset.h"
#include "util/err.h"

/* The schema's format check (config_keys.c): true when `s` is "" or a well-formed list;
 * else false with `why` ("expected ..."). Domain names are checked by domain_caps_resolve,
 * which knows the dataset. */
bool domain_caps_check(const char *s, char *why, size_t n);

/* cap[m] = the cap of domain m in epochs, INFINITY where none; returns 1 when some domain
 * is capped, 0 when none, or ERR_USAGE naming the key, the unknown domain and the
 * dataset's domains (or a domain named twice). */
int domain_caps_resolve(const char *s, const dataset *ds, double *cap, tdm_err *e);

/* Whether caps `epochs` (domain_caps_resolve's) hold a run of `rows` rows of `seq` tokens
 * (run.episodes x steps x train.batch; `what` says that product for the message): in
 * tokens, and when `whole` (sample mixing: a row is never split) in whole rows of each
 * domain. 0, or ERR_USAGE naming the key, the room and what the run needs. `room_out`
 * (may be NULL) gets the room in tokens. */
int domain_caps_fit(const char *s, const dataset *ds, const double *epochs, double rows, int seq, int whole,
                    const char *what, double *room_out, tdm_err *e);

#endif
