/* test_comm.c — comm/: rank detection from launcher environments, and the tcp transport's
 * collectives between forked ranks on loopback.
 *
 *   detect     mpirun, srun, Indexed Job and no-launcher environments; precedence; bad
 *              values (not numbers, rank >= world, missing index) are ERR_USAGE naming
 *              the variable
 *   tcp        3 ranks: the all-reduce is the element-wise sum in rank order, bit for bit
 *              (values chosen so that another order rounds differently), the same on
 *              every rank, for floats and doubles, across several pieces; broadcast;
 *              the stop flag is the OR; a bad TANDEM_COORDINATOR or TANDEM_TRANSPORT is
 *              ERR_USAGE; a rank that never arrives is named after the timeout
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "tests/test.h"

static const char *const VARS[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                                   "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_STEP_NUM_TASKS",
                                   "SLURM_PROCID", "SLURM_LOCALID", "TANDEM_WORLD_SIZE",
                                   "TANDEM_RANK", "JOB_COMPLETION_INDEX", "TANDEM_TRANSPORT",
                                   "TANDEM_COORDINATOR", "TANDEM_COMM_TIMEOUT_S"};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof VARS / sizeof *VARS; i++) unsetenv(VARS[i]);
}

static void test_detect(void) {
    comm_info in;
    tdm_err e = {0};
    clear_env();
    CHECK(comm_detect(&in, &e) == 0 && in.world == 1 && in.rank == 0, "no launcher: %s", e.msg);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("SLURM_STEP_NUM_TASKS", "8", 1); /* mpirun inside a Slurm job: mpirun wins */
    CHECK(comm_detect(&in, &e) == 0 && in.world == 4 && in.rank == 3 && in.local_rank == 1 &&
              strcmp(in.source, "mpirun") == 0, "mpirun: %d/%d %s", in.rank, in.world, in.source);
    setenv("OMPI_COMM_WORLD_RANK", "4", 1);
    CHECK(comm_detect(&in, &e) == ERR_USAGE && strstr(e.msg, "rank 4 of world size 4"), "%s", e.msg);
    setenv("OMPI_COMM_WORLD_RANK", "x1", 1);
    CHECK(comm_detect(&in, &e) == ERR_USAGE && strstr(e.msg, "OMPI_COMM_WORLD_RANK"), "%s", e.msg);
    clear_env();
    setenv("SLURM_STEP_NUM_TASKS", "2", 1);
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_LOCALID", "1", 1);
    CHECK(comm_detect(&in, &e) == 0 && in.world == 2 && in.rank == 1 && strcmp(in.source, "slurm") == 0,
          "srun: %s", e.msg);
    setenv("SLURM_STEP_NUM_TASKS", "1", 1); /* a one-task step is one rank */
    CHECK(comm_detect(&in, &e) == 0 && in.world == 1, "one task");
    clear_env();
    setenv("TANDEM_WORLD_SIZE", "4", 1);
    CHECK(comm_detect(&in, &e) == ERR_USAGE && strstr(e.msg, "JOB_COMPLETION_INDEX"), "%s", e.msg);
    setenv("JOB_COMPLETION_INDEX", "2", 1);
    CHECK(comm_detect(&in, &e) == 0 && in.rank == 2 && strcmp(in.source, "kubernetes") == 0, "k8s");
    setenv("TANDEM_RANK", "3", 1);
    CHECK(comm_detect(&in, &e) == 0 && in.rank == 3, "TANDEM_RANK first: %d", in.rank);
    /* an index at or past a world of 1, or a world of 0: not a lone writer beside the
     * others (it ran silently) */
    clear_env();
    setenv("TANDEM_WORLD_SIZE", "1", 1);
    setenv("JOB_COMPLETION_INDEX", "0", 1);
    CHECK(comm_detect(&in, &e) == 0 && in.world == 1, "index 0 of 1: %s", e.msg);
    setenv("JOB_COMPLETION_INDEX", "1", 1);
    CHECK(comm_detect(&in, &e) == ERR_USAGE && strstr(e.msg, "JOB_COMPLETION_INDEX = 1 but TANDEM_WORLD_SIZE = 1"),
          "index 1 of 1: %s", e.msg);
    setenv("TANDEM_WORLD_SIZE", "0", 1);
    CHECK(comm_detect(&in, &e) == ERR_USAGE && strstr(e.msg, "TANDEM_WORLD_SIZE = 0"), "world 0: %s", e.msg);
    clear_env();
}

/* Rank r's contribution to element i: magnitudes that make the order of additions
 * matter in float (a large value, then small ones that only survive in some orders). */
static double value(int r, size_t i) {
    static const double base[3] = {1.0e8, -1.0e8, 3.0};
    return base[r] * (double)(1 + i % 7) + 0.37 * (double)r + 1e-3 * (double)(i % 11);
}

/* The child for rank r of 3: runs the collectives and exits 0 when every result is the
 * rank-order sum (computed here the same way), 10+ on a mismatch, 1 on an error. */
static int rank_main(int r, const char *port, size_t n) {
    char v[64];
    snprintf(v, sizeof v, "%d", r);
    setenv("TANDEM_RANK", v, 1);
    setenv("TANDEM_WORLD_SIZE", "3", 1);
    /* rank 2 writes the address in brackets, as an IPv6 one would be ("[fd00::1]:29500") */
    if (r == 2)
        snprintf(v, sizeof v, "[127.0.0.1]:%s", port);
    else
        snprintf(v, sizeof v, "127.0.0.1:%s", port);
    setenv("TANDEM_COORDINATOR", v, 1);
    setenv("TANDEM_COMM_TIMEOUT_S", "20", 1);
    tdm_err e = {0};
    comm *c = comm_open(&e);
    if (!c || strcmp(comm_backend(c), "tcp") || comm_rank(c) != r) {
        fprintf(stderr, "rank %d: open: %s\n", r, e.msg);
        return 1;
    }
    float *f = malloc(n * sizeof *f);
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) f[i] = (float)value(r, i), d[i] = value(r, i) * 1e-3;
    int rc = comm_allreduce_f32(c, f, n, &e) || comm_allreduce_f64(c, d, n, &e);
    for (size_t i = 0; !rc && i < n; i++) {
        float sf = (float)value(0, i);
        double sd = value(0, i) * 1e-3;
        for (int k = 1; k < 3; k++) sf += (float)value(k, i), sd += value(k, i) * 1e-3;
        if (memcmp(&sf, &f[i], sizeof sf) || memcmp(&sd, &d[i], sizeof sd)) rc = 10;
    }
    char msg[32] = "";
    if (r == 0) snprintf(msg, sizeof msg, "from rank zero");
    if (!rc && comm_bcast(c, msg, sizeof msg, &e)) rc = 1;
    if (!rc && strcmp(msg, "from rank zero")) rc = 11;
    int any = 0;
    if (!rc && comm_any(c, r == 2, &any, &e)) rc = 1;
    if (!rc && !any) rc = 12;
    if (!rc && comm_any(c, 0, &any, &e)) rc = 1;
    if (!rc && any) rc = 13;
    if (rc == 1) fprintf(stderr, "rank %d: %s\n", r, e.msg);
    free(f);
    free(d);
    comm_close(c);
    return rc;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A loopback port nobody listens on now: the kernel's choice for a socket bound to port 0
 * (a port computed from the pid fell inside the ephemeral range and could be in use). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port ? port : 30000 + (int)(getpid() % 2000);
}

static void test_tcp_collectives(void) {
    clear_env();
    char port[16];
    snprintf(port, sizeof port, "%d", free_port());
    /* 2^27 / 3 elements per piece would be slow here; pieces are a transport detail, the
     * chunking of rank 0's receive (1 MiB) is what several chunks exercise */
    size_t n = 300001;
    pid_t pid[3];
    for (int r = 0; r < 3; r++) {
        pid[r] = fork();
        if (pid[r] == 0) _exit(rank_main(r, port, n));
    }
    int st[3];
    for (int r = 0; r < 3; r++) {
        waitpid(pid[r], &st[r], 0);
        st[r] = WIFEXITED(st[r]) ? WEXITSTATUS(st[r]) : 128 + WTERMSIG(st[r]);
    }
    CHECK(st[0] == 0 && st[1] == 0 && st[2] == 0,
          "rank exits %d %d %d (10: all-reduce not the rank-order sum, 11: broadcast, 12/13: "
          "stop flag)", st[0], st[1], st[2]);
    /* and the order does matter for these values: another order gives other bits */
    int differs = 0;
    for (size_t i = 0; i < 100 && !differs; i++) {
        float a = (float)value(0, i) + (float)value(1, i) + (float)value(2, i);
        float b = (float)value(2, i) + (float)value(1, i) + (float)value(0, i);
        differs = memcmp(&a, &b, sizeof a) != 0;
    }
    CHECK(differs, "the test values do not make the order of additions visible");
}

static void test_tcp_errors(void) {
    clear_env();
    tdm_err e = {0};
    setenv("TANDEM_RANK", "1", 1);
    setenv("TANDEM_WORLD_SIZE", "2", 1);
    const char *bad_coord[] = {"no-port-here", "[::1]", "[]:29500", "[::1:29500", "[::1]29500",
                               "h:0", "h:65536", "h:105537", "h:-1", "h:+80", "h:80x", "[::1]:0"};
    comm *c = NULL;
    for (size_t i = 0; i < sizeof bad_coord / sizeof *bad_coord; i++) {
        setenv("TANDEM_COORDINATOR", bad_coord[i], 1);
        c = comm_open(&e);
        CHECK(!c && e.code == ERR_USAGE && strstr(e.msg, "TANDEM_COORDINATOR"), "coordinator %s: %s",
              bad_coord[i], e.msg);
    }
    setenv("TANDEM_TRANSPORT", "carrier-pigeon", 1);
    c = comm_open(&e);
    CHECK(!c && e.code == ERR_USAGE && strstr(e.msg, "TANDEM_TRANSPORT"), "bad transport: %s", e.msg);
    unsetenv("TANDEM_TRANSPORT");
    /* rank 0 alone: gives up after the timeout, naming the missing rank */
    setenv("TANDEM_RANK", "0", 1);
    char v[64];
    snprintf(v, sizeof v, "127.0.0.1:%d", free_port());
    setenv("TANDEM_COORDINATOR", v, 1);
    setenv("TANDEM_COMM_TIMEOUT_S", "0.5", 1);
    c = comm_open(&e);
    CHECK(!c && strstr(e.msg, "rank(s) 1 of 2 did not connect") && strstr(e.msg, "within 0.5 s"),
          "lonely rank 0: %s", e.msg);
    /* a stop signal while the ranks gather ends the wait at once, on rank 0 and the others
     * (it waited for TANDEM_COMM_TIMEOUT_S) */
    static volatile sig_atomic_t stop = 1;
    comm_set_stop_flag(&stop);
    setenv("TANDEM_COMM_TIMEOUT_S", "30", 1);
    for (int r = 0; r < 2; r++) {
        setenv("TANDEM_RANK", r ? "1" : "0", 1);
        double t0 = now_s();
        c = comm_open(&e);
        CHECK(!c && strstr(e.msg, "a stop signal came") && now_s() - t0 < 2, "stop on rank %d: %.1f s: %s",
              r, now_s() - t0, e.msg);
    }
    comm_set_stop_flag(NULL);
    setenv("TANDEM_COMM_TIMEOUT_S", "0.5", 1);
    setenv("TANDEM_RANK", "0", 1);
    /* rank 1 alone: cannot reach rank 0, says where it looked */
    setenv("TANDEM_RANK", "1", 1);
    c = comm_open(&e);
    CHECK(!c && strstr(e.msg, "could not reach the coordinator 127.0.0.1:"), "lonely rank 1: %s", e.msg);
    /* the same in brackets: the address, refused (not "Name or service not known") */
    snprintf(v, sizeof v, "[127.0.0.1]:%d", free_port());
    setenv("TANDEM_COORDINATOR", v, 1);
    c = comm_open(&e);
    CHECK(!c && strstr(e.msg, "coordinator 127.0.0.1:") && strstr(e.msg, "refused"), "bracketed: %s", e.msg);
    /* a coordinator that never answers a SYN: a listener whose accept queue is full (the
     * kernel drops the SYN, as a firewall would). The deadline holds; a blocking connect()
     * went on retrying for ~2 min whatever TANDEM_COMM_TIMEOUT_S said. */
    int lfd = socket(AF_INET, SOCK_STREAM, 0), filler[4] = {-1, -1, -1, -1};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 0) == 0 &&
              getsockname(lfd, (struct sockaddr *)&a, &al) == 0, "listener");
    for (int i = 0; i < 4; i++) { /* fill the queue (never accepted) */
        filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (filler[i] >= 0) (void)connect(filler[i], (struct sockaddr *)&a, sizeof a);
    }
    usleep(100000);
    snprintf(v, sizeof v, "127.0.0.1:%d", ntohs(a.sin_port));
    setenv("TANDEM_COORDINATOR", v, 1);
    setenv("TANDEM_COMM_TIMEOUT_S", "1", 1);
    double t0 = now_s();
    c = comm_open(&e);
    double took = now_s() - t0;
    CHECK(!c && strstr(e.msg, "could not reach the coordinator 127.0.0.1:") && took < 5,
          "a coordinator that drops the SYN: %.1f s: %s", took, e.msg);
    if (c) comm_close(c);
    for (int i = 0; i < 4; i++)
        if (filler[i] >= 0) close(filler[i]);
    close(lfd);
    /* a timeout that is no number of seconds (strtod took "inf": a rendezvous without end) */
    const char *bad[] = {"inf", "1e999", "nan", "0", "-3", "20s"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("TANDEM_COMM_TIMEOUT_S", bad[i], 1);
        c = comm_open(&e);
        CHECK(!c && e.code == ERR_USAGE && strstr(e.msg, "TANDEM_COMM_TIMEOUT_S"), "timeout %s: %s", bad[i], e.msg);
        if (c) comm_close(c);
    }
    clear_env();
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(test_detect);
    RUN(test_tcp_collectives);
    RUN(test_tcp_errors);
    return test_summary("test_comm");
}
