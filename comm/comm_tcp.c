/* comm_tcp.c — the TCP transport of comm.h: a star through rank 0, for launchers without
 * MPI (the pods of a Kubernetes Indexed Job; `TANDEM_TRANSPORT=tcp` anywhere).
 *
 * Rank 0 listens on the port of TANDEM_COORDINATOR=host:port; every other rank connects
 * to it (retrying while rank 0 is not up yet) and introduces itself. A collective is one
 * framed message per rank to rank 0 and one back: rank 0 adds the ranks' buffers in rank
 * order (the same additions, in the same order, as comm_mpi.c: the bits do not depend on
 * the transport) and sends the sum to everyone. Every message carries its operation and
 * size, so ranks that call different collectives get an error instead of garbage.
 *
 * Every wait has a deadline: TANDEM_COMM_TIMEOUT_S (default 600 s) for a collective and
 * for all ranks to arrive at the start; a stop signal (comm_set_stop_flag) ends the wait
 * at the start at once. The hello carries the run key (comm_set_run_key): rank 0 turns
 * away another run's ranks and reads the hellos side by side, each within 10 s. A rank that dies closes its socket and the
 * others fail at once, naming it. Rank 0 moves R - 1 copies of every buffer each way,
 * which suits the few CPU ranks this transport is for; many ranks want MPI. */
#include "comm/comm_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/args.h"

enum { OP_HELLO = 1, OP_ALLREDUCE_F32, OP_ALLREDUCE_F64, OP_BCAST, OP_ANY, OP_BARRIER };
static const char *const OP_NAMES[] = {"?", "hello", "all-reduce", "all-reduce", "broadcast",
                                       "stop-flag agreement", "barrier"};
#define TCP_MAGIC 0x434d4454u /* "TDMC" */
#define CHUNK ((size_t)1 << 20)

typedef struct frame {
    uint32_t magic, op;
    uint64_t value; /* bytes that follow, or the value itself (hello, any) */
} frame;

/* A rank's introduction: rank | world << 32, then its run key (comm_set_run_key). Rank 0
 * answers with the world size, or HELLO_REFUSED (another run's rank) and closes. */
typedef struct hello {
    frame f;
    unsigned char key[32];
} hello;
#define HELLO_REFUSED UINT64_MAX

static int key_none(const unsigned char *k) {
    for (int i = 0; i < 32; i++)
        if (k[i]) return 0;
    return 1;
}

typedef struct tcp {
    int *fd;      /* rank 0: fd[r] for the other ranks r; others: fd[0] to rank 0 */
    double timeout_s;  /* how long a collective waits for a peer: base_s + comm_allow_wait's */
    double base_s;     /* TANDEM_COMM_TIMEOUT_S, or 600 s */
    char coordinator[256];
    char *scratch; /* CHUNK bytes: rank 0's receive buffer for the sums */
    int rendezvous; /* the ranks wait for each other at the start: a stop signal ends it */
} tcp;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *peer_name(const comm *c, int peer, char *buf, size_t cap) {
    if (peer == 0) snprintf(buf, cap, "rank 0 (the coordinator %s)", ((tcp *)c->impl)->coordinator);
    else snprintf(buf, cap, "rank %d", peer);
    return buf;
}

/* Whether a stop signal came (comm_set_stop_flag). */
static int stop_pending(void) { return comm_stop_flag && *comm_stop_flag; }

/* Waits for `events` on fd until the deadline; ETIMEDOUT when it passes. `stoppable`:
 * ECANCELED as soon as a stop signal came (polls in slices of 0.2 s, so that a signal
 * that came between the check and the poll is seen too). */
static int wait_fd(int fd, short events, double deadline, int stoppable) {
    for (;;) {
        if (stoppable && stop_pending()) return ECANCELED;
        double left = deadline - now_s();
        if (left <= 0) return ETIMEDOUT;
        if (stoppable && left > 0.2) left = 0.2;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left > 1e6 ? 1000000000 : (int)(left * 1000) + 1);
        if (n > 0) return 0;
        if (n < 0 && errno != EINTR) return errno;
    }
}

/* Sends or receives exactly n bytes with `peer`, by the deadline. */
static int xfer(comm *c, int fd, int peer, void *buf, size_t n, int sending, double deadline,
                tdm_err *e) {
    char *p = buf, who[320];
    while (n > 0) {
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k == 0)
            return err_set(e, ERR_INTERNAL, "rank %d: %s closed the connection (it stopped or "
                           "died; its log says why)", c->info.rank, peer_name(c, peer, who, sizeof who));
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return err_set(e, ERR_INTERNAL, "rank %d: connection to %s: %s", c->info.rank,
                           peer_name(c, peer, who, sizeof who), strerror(errno));
        int w = wait_fd(fd, sending ? POLLOUT : POLLIN, deadline, ((tcp *)c->impl)->rendezvous);
        if (w == ECANCELED)
            return err_set(e, ERR_INTERNAL, "rank %d: a stop signal came while waiting for %s at the "
                           "start", c->info.rank, peer_name(c, peer, who, sizeof who));
        if (w == ETIMEDOUT) {
            const tcp *t = c->impl;
            char extra[96] = "";
            if (t->timeout_s > t->base_s)
                snprintf(extra, sizeof extra, " %g s, and %g s its store may hold it", t->base_s,
                         t->timeout_s - t->base_s);
            return err_set(e, ERR_INTERNAL, "rank %d: %s did not answer within %g s "
                           "(TANDEM_COMM_TIMEOUT_S%s); is it still running?", c->info.rank,
                           peer_name(c, peer, who, sizeof who), t->timeout_s, extra);
        }
        if (w) return err_set(e, ERR_INTERNAL, "rank %d: waiting for %s: %s", c->info.rank,
                              peer_name(c, peer, who, sizeof who), strerror(w));
    }
    return 0;
}

static int send_frame(comm *c, int fd, int peer, uint32_t op, uint64_t value, double deadline, tdm_err *e) {
    frame f = {TCP_MAGIC, op, value};
    return xfer(c, fd, peer, &f, sizeof f, 1, deadline, e);
}

/* Receives a frame and checks that it is `op` (and, with want_value, that value). */
static int recv_frame(comm *c, int fd, int peer, uint32_t op, uint64_t *value, int check_value,
                      double deadline, tdm_err *e) {
    frame f;
    int rc = xfer(c, fd, peer, &f, sizeof f, 0, deadline, e);
    if (rc) return rc;
    char who[320];
    if (f.magic != TCP_MAGIC)
        return err_set(e, ERR_INTERNAL, "rank %d: %s sent something that is not tandem's protocol",
                       c->info.rank, peer_name(c, peer, who, sizeof who));
    if (f.op != op || (check_value && f.value != *value))
        return err_set(e, ERR_INTERNAL,
                       "rank %d: %s is in a %s of %llu bytes while this rank is in a %s of %llu: "
                       "the ranks run different code or configs", c->info.rank,
                       peer_name(c, peer, who, sizeof who),
                       OP_NAMES[f.op < 7 ? f.op : 0], (unsigned long long)f.value,
                       OP_NAMES[op], (unsigned long long)*value);
    *value = f.value;
    return 0;
}

static void set_socket_options(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* Whether an accepted rank's connection has ended (EOF or an error, nothing left to read):
 * its process is gone, and another may take its index. */
static int peer_gone(int fd) {
    struct pollfd q = {.fd = fd, .events = POLLIN};
    if (poll(&q, 1, 0) <= 0) return 0;
    if (q.revents & (POLLERR | POLLNVAL)) return 1;
    char b;
    ssize_t k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* "host:port" → its parts; ERR_USAGE naming TANDEM_COORDINATOR otherwise. */
static int parse_coordinator(const char *v, char *host, size_t cap, char *port, size_t pcap, tdm_err *e) {
    const char *colon = v ? strrchr(v, ':') : NULL;
    /* "[addr]:port": the port after the closing bracket, and something inside it */
    const char *close = v && v[0] == '[' ? strchr(v, ']') : NULL;
    if (v && v[0] == '[' && (!close || close == v + 1 || close[1] != ':')) colon = NULL;
    if (!v || !colon || colon == v || !colon[1] || (size_t)(colon - v) >= cap || strlen(colon + 1) >= pcap)
        return err_set(e, ERR_USAGE, "TANDEM_COORDINATOR = '%s': the tcp transport needs host:port "
                       "of rank 0 (the rendered Jobs set it)", v ? v : "");
    /* a decimal port in 1..65535: getaddrinfo takes 105537 as 105537 mod 65536 and 0 as
     * "any free port", which no other rank can know */
    char *end;
    errno = 0;
    long pn = strtol(colon + 1, &end, 10);
    if (errno || *end || colon[1] < '0' || colon[1] > '9' || pn < 1 || pn > 65535)
        return err_set(e, ERR_USAGE, "TANDEM_COORDINATOR = '%s': the port '%s' is not a number in "
                       "1..65535", v, colon + 1);
    snprintf(host, cap, "%.*s", (int)(colon - v), v);
    snprintf(port, pcap, "%s", colon + 1);
    /* "[fd00::1]:29500", the usual way to write an IPv6 address with a port: getaddrinfo
     * takes the address without its brackets */
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    return 0;
}

static int listen_all(comm *c, const char *port, double deadline, tdm_err *e) {
    tcp *t = c->impl;
    int R = c->info.world;
    struct addrinfo hints = {.ai_family = AF_INET6, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int lfd = -1, rc = 0;
    /* IPv6 with v4-mapped addresses where the kernel has it, else IPv4 */
    for (int fam = 0; fam < 2 && lfd < 0; fam++) {
        hints.ai_family = fam == 0 ? AF_INET6 : AF_INET;
        if (getaddrinfo(NULL, port, &hints, &ai) != 0) continue;
        lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1, zero = 0;
        if (lfd >= 0) setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (lfd >= 0 && fam == 0) setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (lfd >= 0 && (bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, R))) {
            rc = errno;
            close(lfd);
            lfd = -1;
        }
        freeaddrinfo(ai);
    }
    if (lfd >= 0) {
        rc = 0; /* an IPv6 failure that IPv4 made up for */
        fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK); /* accept never blocks */
    }
    if (lfd < 0)
        return err_set(e, ERR_USAGE, "rank 0: cannot listen on port %s of TANDEM_COORDINATOR: %s",
                       port, strerror(rc ? rc : EADDRNOTAVAIL));
    /* The hellos are read side by side (poll over the listener and every connection not
     * yet introduced), each by its own deadline: a silent connection (a half-open probe,
     * a health check that never speaks) was read alone for 10 s while the real ranks
     * waited behind it, and three of them outlasted a short TANDEM_COMM_TIMEOUT_S. */
    enum { PENDING = 64 };
    struct { int fd; size_t got; double by; hello h; } pend[PENDING];
    int npend = 0, arrived = 0, refused = 0;
    char odd[200] = ""; /* the last hello turned away for its rank or world size */
    while (!rc && arrived < R - 1) {
        if (stop_pending()) {
            rc = err_set(e, ERR_INTERNAL, "rank 0: a stop signal came while waiting for the other "
                         "ranks to connect to port %s", port);
            break;
        }
        double now = now_s();
        if (now >= deadline) {
            char missing[512] = "";
            size_t len = 0;
            for (int r = 1; r < R && len < sizeof missing - 16; r++)
                if (t->fd[r] < 0) len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", r);
            rc = err_set(e, ERR_INTERNAL, "rank 0: rank(s) %s of %d did not connect to port %s "
                         "within %g s (TANDEM_COMM_TIMEOUT_S): are they running, with the "
                         "same TANDEM_WORLD_SIZE and TANDEM_COORDINATOR?", missing, R, port, t->timeout_s);
            if (refused)
                err_append(e, " (%d connection%s turned away: the ranks of another run or another store "
                           "(give each run its own port)%s%s)", refused, refused > 1 ? "s" : "",
                           odd[0] ? ", or the last: " : "", odd);
            break;
        }
        struct pollfd p[PENDING + 1];
        p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        double wake = deadline < now + 0.2 ? deadline : now + 0.2; /* 0.2 s: the stop flag */
        for (int i = 0; i < npend; i++) {
            p[i + 1] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
            if (pend[i].by < wake) wake = pend[i].by;
        }
        int ms = (int)((wake - now) * 1000) + 1; /* an overdue one: 0, never a negative (for ever) */
        int n = poll(p, (nfds_t)npend + 1, ms > 0 ? ms : 0);
        if (n < 0 && errno != EINTR) {
            rc = err_sys(e, ERR_INTERNAL, errno, "rank 0: waiting for the other ranks on port %s", port);
            break;
        }
        now = now_s();
        /* the connections that spoke, closed, or ran out of time (backwards: removal
         * moves the last one into the slot) */
        for (int i = npend - 1; n > 0 && i >= 0; i--) {
            int drop = 0;
            if (p[i + 1].revents) {
                ssize_t k = recv(pend[i].fd, (char *)&pend[i].h + pend[i].got, sizeof pend[i].h - pend[i].got, MSG_DONTWAIT);
                if (k > 0) pend[i].got += (size_t)k;
                else if (k == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) drop = 1;
            }
            if (!drop && pend[i].got >= sizeof(frame) && (pend[i].h.f.magic != TCP_MAGIC || pend[i].h.f.op != OP_HELLO))
                drop = 1; /* not one of ours */
            if (!drop && pend[i].got == sizeof pend[i].h) {
                frame f = pend[i].h.f;
                drop = 1;
                if (f.magic == TCP_MAGIC && f.op == OP_HELLO) { /* else not one of ours: ignore it */
                    int r = (int)(f.value & 0xffffffffu), world = (int)(f.value >> 32);
                    const unsigned char *k = pend[i].h.key;
                    if (!key_none(k) && !key_none(comm_run_key) && memcmp(k, comm_run_key, 32)) {
                        /* a rank of another run on the same port: told so, and waited past */
                        frame no = {TCP_MAGIC, OP_HELLO, HELLO_REFUSED};
                        if (send(pend[i].fd, &no, sizeof no, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {}
                        refused++;
                    } else if (world != R || r < 1 || r >= R || (t->fd[r] >= 0 && !peer_gone(t->fd[r]))) {
                        /* turned away, said at the deadline if no one else comes: a rank of
                         * another world size, or a second rank r while the first is still
                         * connected, must not fail rank 0 (exit 2 fails a Kubernetes Job for
                         * good), and a stranger's bytes must not end the run */
                        frame no = {TCP_MAGIC, OP_HELLO, HELLO_REFUSED};
                        if (send(pend[i].fd, &no, sizeof no, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {}
                        snprintf(odd, sizeof odd, "a process introduced itself as rank %d of %d, but this run has "
                                 "%d ranks%s", r, world, R,
                                 r >= 1 && r < R && t->fd[r] >= 0 ? " and that rank is already connected" : "");
                        refused++;
                    } else {
                        if (t->fd[r] >= 0) { /* a rank that left after its hello (stopped, killed), replaced */
                            close(t->fd[r]);
                            arrived--;
                        }
                        t->fd[r] = pend[i].fd;
                        arrived++;
                        pend[i].fd = -1;
                    }
                }
            }
            if (!drop && now >= pend[i].by) drop = 1; /* silent for 10 s: not one of ours */
            if (drop) {
                if (pend[i].fd >= 0) close(pend[i].fd);
                pend[i] = pend[--npend];
            }
        }
        for (int i = npend - 1; n == 0 && i >= 0; i--) /* nothing spoke: the overdue ones */
            if (now >= pend[i].by) {
                close(pend[i].fd);
                pend[i] = pend[--npend];
            }
        if (rc || !(p[0].revents & POLLIN)) continue;
        for (;;) { /* every connection waiting on the listener */
            int fd = accept(lfd, NULL, NULL);
            if (fd < 0) break;
            set_socket_options(fd);
            if (npend == PENDING) { /* a flood: the oldest silent one makes room */
                close(pend[0].fd);
                pend[0] = pend[--npend];
            }
            pend[npend].fd = fd;
            pend[npend].got = 0;
            pend[npend].by = now + 10 < deadline ? now + 10 : deadline;
            npend++;
        }
    }
    for (int i = 0; i < npend; i++) close(pend[i].fd);
    close(lfd);
    for (int r = 1; !rc && r < R; r++) rc = send_frame(c, t->fd[r], r, OP_HELLO, (uint64_t)R, deadline, e);
    return rc;
}

/* Connects fd to `a` by the deadline: 0, or -1 with errno set. Non-blocking, because a
 * blocking connect() to a host that drops the SYN retries for ~2 min whatever the
 * deadline (TANDEM_COMM_TIMEOUT_S) says. */
static int connect_by(int fd, const struct sockaddr *a, socklen_t n, double deadline) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    if (connect(fd, a, n) == 0) return 0;
    if (errno != EINPROGRESS) return -1;
    int w = wait_fd(fd, POLLOUT, deadline, 1), err = 0;
    socklen_t len = sizeof err;
    if (w) {
        errno = w;
        return -1;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -1;
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

static int connect_to_zero(comm *c, const char *host, const char *port, double deadline, tdm_err *e) {
    tcp *t = c->impl;
    const char *why = "no attempt";
    int last = 0;
    while (now_s() < deadline && !stop_pending()) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        int g = getaddrinfo(host, port, &hints, &ai);
        if (g != 0) {
            why = gai_strerror(g); /* the pod's DNS name may not exist yet */
        } else {
            for (struct addrinfo *a = ai; a; a = a->ai_next) {
                int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0) continue;
                /* at most 10 s on one address: the next (or the next try) may answer */
                double by = now_s() + 10 < deadline ? now_s() + 10 : deadline;
                if (connect_by(fd, a->ai_addr, a->ai_addrlen, by) == 0) {
                    set_socket_options(fd);
                    t->fd[0] = fd;
                    break;
                }
                last = errno;
                why = NULL;
                close(fd);
                if (last == ECANCELED) break;
            }
            freeaddrinfo(ai);
        }
        if (t->fd[0] >= 0) break;
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (t->fd[0] < 0 && stop_pending())
        return err_set(e, ERR_INTERNAL, "rank %d: a stop signal came while trying to reach the "
                       "coordinator %s:%s", c->info.rank, host, port);
    if (t->fd[0] < 0)
        return err_set(e, ERR_INTERNAL, "rank %d: could not reach the coordinator %s:%s within "
                       "%g s (TANDEM_COMM_TIMEOUT_S): %s", c->info.rank, host, port,
                       t->timeout_s, why ? why : strerror(last));
    hello h = {{TCP_MAGIC, OP_HELLO, (uint64_t)c->info.rank | (uint64_t)c->info.world << 32}, {0}};
    memcpy(h.key, comm_run_key, sizeof h.key);
    uint64_t world = (uint64_t)c->info.world;
    int rc = xfer(c, t->fd[0], 0, &h, sizeof h, 1, deadline, e);
    if (!rc) rc = recv_frame(c, t->fd[0], 0, OP_HELLO, &world, 0, deadline, e);
    if (!rc && world == HELLO_REFUSED)
        return err_set(e, ERR_USAGE, "rank %d: the coordinator %s:%s turned this rank away: it is rank 0 of "
                       "another run (another store: two runs were given the same TANDEM_COORDINATOR; give each "
                       "its own port, cluster.coordinator_port), or of %d ranks with rank %d already connected, or "
                       "of another TANDEM_WORLD_SIZE (its log says which)", c->info.rank, host, port,
                       c->info.world, c->info.rank);
    if (!rc && world != (uint64_t)c->info.world)
        return err_set(e, ERR_USAGE, "rank %d: the coordinator %s:%s runs %llu ranks, this rank was "
                       "started as one of %d: start every rank with the same TANDEM_WORLD_SIZE",
                       c->info.rank, host, port, (unsigned long long)world, c->info.world);
    return rc;
}

int comm_tcp_init(comm *c, tdm_err *e) {
    tcp *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, ERR_INTERNAL, "out of memory");
    c->impl = t;
    t->fd = malloc((size_t)c->info.world * sizeof *t->fd);
    for (int r = 0; t->fd && r < c->info.world; r++) t->fd[r] = -1;
    t->scratch = malloc(CHUNK);
    if (!t->fd || !t->scratch) return err_set(e, ERR_INTERNAL, "out of memory");
    t->timeout_s = 600;
    const char *v = getenv("TANDEM_COMM_TIMEOUT_S");
    if (v) {
        /* strict: not "inf", "1e999" or "0x10" (a rendezvous that never times out) */
        double x = 0;
        if (args_parse_double(v, &x) || !(x > 0) || x > 1e7)
            return err_set(e, ERR_USAGE, "TANDEM_COMM_TIMEOUT_S = '%.60s' is not a number of seconds in "
                           "(0, 1e7]", v);
        t->timeout_s = x;
    }
    t->base_s = t->timeout_s;
    char host[200], port[32];
    int rc = parse_coordinator(getenv("TANDEM_COORDINATOR"), host, sizeof host, port, sizeof port, e);
    if (rc) return rc;
    snprintf(t->coordinator, sizeof t->coordinator, "%s:%s", host, port);
    double deadline = now_s() + t->timeout_s;
    t->rendezvous = 1;
    rc = c->info.rank == 0 ? listen_all(c, port, deadline, e) : connect_to_zero(c, host, port, deadline, e);
    t->rendezvous = 0;
    return rc;
}

/* Adds src (bytes of floats or doubles) into dst element by element: dst += src. */
static void add_into(char *dst, const char *src, size_t bytes, int is_double) {
    if (is_double) {
        double *d = (double *)dst;
        const double *s = (const double *)src;
        for (size_t i = 0; i < bytes / sizeof *d; i++) d[i] += s[i];
    } else {
        float *d = (float *)dst;
        const float *s = (const float *)src;
        for (size_t i = 0; i < bytes / sizeof *d; i++) d[i] += s[i];
    }
}

int comm_tcp_allreduce(comm *c, void *buf, size_t n, int is_double, tdm_err *e) {
    tcp *t = c->impl;
    int R = c->info.world, rc = 0;
    uint32_t op = is_double ? OP_ALLREDUCE_F64 : OP_ALLREDUCE_F32;
    uint64_t bytes = (uint64_t)n * (is_double ? sizeof(double) : sizeof(float));
    double deadline = now_s() + t->timeout_s;
    if (c->info.rank != 0) {
        rc = send_frame(c, t->fd[0], 0, op, bytes, deadline, e);
        if (!rc) rc = xfer(c, t->fd[0], 0, buf, bytes, 1, deadline, e);
        if (!rc) rc = recv_frame(c, t->fd[0], 0, op, &bytes, 1, deadline, e);
        if (!rc) rc = xfer(c, t->fd[0], 0, buf, bytes, 0, deadline, e);
        return rc;
    }
    /* rank 0: buf (its own part) + rank 1's + rank 2's ...: the order of comm_mpi.c. The
     * chunk size is a multiple of 8, so chunks never split an element. */
    for (int r = 1; !rc && r < R; r++) {
        uint64_t want = bytes;
        rc = recv_frame(c, t->fd[r], r, op, &want, 1, deadline, e);
        for (uint64_t off = 0; !rc && off < bytes; off += CHUNK) {
            size_t len = bytes - off < CHUNK ? (size_t)(bytes - off) : CHUNK;
            rc = xfer(c, t->fd[r], r, t->scratch, len, 0, deadline, e);
            if (!rc) add_into((char *)buf + off, t->scratch, len, is_double);
        }
    }
    for (int r = 1; !rc && r < R; r++) {
        rc = send_frame(c, t->fd[r], r, op, bytes, deadline, e);
        if (!rc) rc = xfer(c, t->fd[r], r, buf, bytes, 1, deadline, e);
    }
    return rc;
}

int comm_tcp_bcast(comm *c, void *buf, size_t bytes, tdm_err *e) {
    tcp *t = c->impl;
    double deadline = now_s() + t->timeout_s;
    uint64_t b = bytes;
    if (c->info.rank != 0) {
        int rc = recv_frame(c, t->fd[0], 0, OP_BCAST, &b, 1, deadline, e);
        return rc ? rc : xfer(c, t->fd[0], 0, buf, bytes, 0, deadline, e);
    }
    for (int r = 1; r < c->info.world; r++) {
        int rc = send_frame(c, t->fd[r], r, OP_BCAST, b, deadline, e);
        if (!rc) rc = xfer(c, t->fd[r], r, buf, bytes, 1, deadline, e);
        if (rc) return rc;
    }
    return 0;
}

/* OR of `local` over the ranks, as message `op` (a barrier is its own op, so that it
 * never pairs with a stop-flag agreement on another rank). */
static int or_all(comm *c, uint32_t op, int local, int *any, tdm_err *e) {
    tcp *t = c->impl;
    double deadline = now_s() + t->timeout_s;
    uint64_t v = local != 0;
    int rc = 0;
    if (c->info.rank != 0) {
        rc = send_frame(c, t->fd[0], 0, op, v, deadline, e);
        if (!rc) rc = recv_frame(c, t->fd[0], 0, op, &v, 0, deadline, e);
        *any = v != 0;
        return rc;
    }
    for (int r = 1; !rc && r < c->info.world; r++) {
        uint64_t x = 0;
        rc = recv_frame(c, t->fd[r], r, op, &x, 0, deadline, e);
        v |= x != 0;
    }
    for (int r = 1; !rc && r < c->info.world; r++) rc = send_frame(c, t->fd[r], r, op, v, deadline, e);
    *any = v != 0;
    return rc;
}

int comm_tcp_any(comm *c, int local, int *any, tdm_err *e) { return or_all(c, OP_ANY, local, any, e); }

void comm_tcp_allow_wait(comm *c, double extra_s) {
    tcp *t = c->impl;
    t->timeout_s = t->base_s + extra_s;
}

int comm_tcp_barrier(comm *c, tdm_err *e) {
    int any;
    return or_all(c, OP_BARRIER, 0, &any, e);
}

/* Closes every connection (after a barrier when graceful): the other ranks fail at
 * their next collective, naming this one, and end too. */
void comm_tcp_close(comm *c, int graceful) {
    tcp *t = c->impl;
    if (!t) return;
    if (graceful && t->fd) {
        tdm_err ignore;
        comm_tcp_barrier(c, &ignore);
    }
    for (int r = 0; t->fd && r < c->info.world; r++)
        if (t->fd[r] >= 0) close(t->fd[r]);
    free(t->fd);
    free(t->scratch);
    free(t);
    c->impl = NULL;
}
