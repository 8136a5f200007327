/* test_svgplot.c — the SVG line plots of report/svgplot.h.
 *
 * Structural checks on the generated text (well-formed XML by Debian's /usr/bin/python3
 * and xml.dom.minidom, escaped names, one polyline per series, ticks at round steps, the
 * edge cases n = 0, n = 1, NaN/Inf, constant and 64 series), and the render test: the
 * plot is drawn by headless Chromium (tests/svg/render.py) and the PNG must show lines,
 * several colours and a legend. A missing /usr/bin/chromium or /usr/bin/python3 is a
 * FAILURE naming `scripts/deps.sh test`, never a silent pass.
 *
 * TANDEM_SVGPLOT_OUT=DIR leaves the rendered SVG and PNG files in DIR to look at.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "report/svgplot.h"
#include "tests/test.h"

#define PYTHON "/usr/bin/python3"
#define CHROMIUM "/usr/bin/chromium"

/* ---- helpers ------------------------------------------------------------------------- */

static const char *repo_root(void) {
    const char *r = getenv("TANDEM_ROOT");
    return r && *r ? r : ".";
}

/* Runs argv (argv[0] an absolute path) and waits; its exit status, or -1 when it could
 * not run or died of a signal. No shell, so paths need no quoting. */
static int run_argv(char *const argv[]) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execv(argv[0], argv);
        fprintf(stderr, "execv %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static size_t count(const char *hay, const char *needle) {
    size_t n = 0, k = strlen(needle);
    for (const char *p = strstr(hay, needle); p; p = strstr(p + k, needle)) n++;
    return n;
}

static char *render(const svgplot *p) {
    tdm_err e = {0};
    char *s = svgplot_render(p, NULL, &e);
    if (!s) fprintf(stderr, "  svgplot_render: %s\n", e.msg);
    return s;
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int bad = fputs(text, f) < 0;
    return (fclose(f) != 0 || bad) ? -1 : 0;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, r;
    char chunk[8192];
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + r + 1 > cap) {
            cap = (len + r + 1) * 2;
            char *q = realloc(buf, cap);
            if (!q) abort();
            buf = q;
        }
        memcpy(buf + len, chunk, r);
        len += r;
    }
    fclose(f);
    if (!buf && !(buf = calloc(1, 1))) abort();
    buf[len] = '\0';
    return buf;
}

/* 0 when /usr/bin/python3 is there; otherwise says how to get it. */
static int python_ready(void) {
    if (access(PYTHON, X_OK) == 0) return 0;
    fprintf(stderr, "  %s not found: run `scripts/deps.sh test` (installs Debian's python3)\n",
            PYTHON);
    return -1;
}

/* Parses the SVG with xml.dom.minidom: a well-formed document whose root is an SVG 1.1
 * <svg> with width/height matching its viewBox. Returns the text content of every <text>
 * element, one per line (unescaped), malloc'd; NULL (and says why) when it does not parse. */
static const char xml_check_py[] =
    "import sys, xml.dom.minidom as M\n"
    "d = M.parse(sys.argv[1]); r = d.documentElement\n"
    "assert r.tagName == 'svg', r.tagName\n"
    "assert r.getAttribute('xmlns') == 'http://www.w3.org/2000/svg', 'namespace'\n"
    "assert r.getAttribute('version') == '1.1', 'version'\n"
    "w, h = r.getAttribute('width'), r.getAttribute('height')\n"
    "assert r.getAttribute('viewBox') == '0 0 %s %s' % (w, h), 'viewBox'\n"
    "def text(n):\n"
    "    return ''.join(c.data if c.nodeType == c.TEXT_NODE else text(c) for c in "
    "n.childNodes)\n"
    "with open(sys.argv[2], 'w', encoding='utf-8') as f:\n"
    "    for t in d.getElementsByTagName('text'): f.write(text(t) + '\\n')\n";

static char *xml_texts(const char *svg_text) {
    if (python_ready() != 0) return NULL;
    char *dir = test_tmpdir("svgxml");
    char svg[4200], out[4200];
    snprintf(svg, sizeof svg, "%s/p.svg", dir);
    snprintf(out, sizeof out, "%s/texts.txt", dir);
    char *texts = NULL;
    if (write_text(svg, svg_text) != 0) {
        fprintf(stderr, "  cannot write %s\n", svg);
    } else {
        char *argv[] = {PYTHON, "-c", (char *)xml_check_py, svg, out, NULL};
        int st = run_argv(argv);
        if (st != 0)
            fprintf(stderr, "  the SVG is not a well-formed SVG document (exit %d)\n", st);
        else
            texts = read_text(out);
    }
    test_rmtree(dir);
    free(dir);
    return texts;
}

/* True when `line` is one whole line of `texts`. */
static int has_line(const char *texts, const char *line) {
    size_t k = strlen(line);
    for (const char *p = strstr(texts, line); p; p = strstr(p + 1, line))
        if ((p == texts || p[-1] == '\n') && p[k] == '\n') return 1;
    return 0;
}

/* Tick label values of class `cls` ("xtick" or "ytick"), in document order. */
static int tick_values(const char *svg, const char *cls, double *v, int max, int *comma) {
    char key[32];
    snprintf(key, sizeof key, "class=\"%s\"", cls);
    int n = 0;
    *comma = 0;
    for (const char *p = strstr(svg, key); p && n < max; p = strstr(p + 1, key)) {
        const char *gt = strchr(p, '>'), *lt = gt ? strchr(gt, '<') : NULL;
        if (!lt) break;
        char label[64];
        size_t len = (size_t)(lt - gt - 1);
        if (len >= sizeof label) len = sizeof label - 1;
        memcpy(label, gt + 1, len);
        label[len] = '\0';
        if (strchr(label, ',')) *comma = 1;
        v[n++] = strtod(label, NULL);
    }
    return n;
}

/* True for 1, 2 or 5 × 10^k (to rounding). */
static int is_nice(double step) {
    double p = pow(10, floor(log10(step) + 1e-9));
    double m = step / p;
    return fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6;
}

/* α-like series: softmax over M domains of slowly drifting scores, n episodes. */
static void alpha_fill(double *y, int M, size_t n) {
    for (size_t t = 0; t < n; t++) {
        double z[64], sum = 0;
        for (int m = 0; m < M; m++) {
            z[m] = exp(1.2 * sin(0.05 * (double)t * (1 + 0.3 * m) + m) * (double)t /
                       (double)(n + 1));
            sum += z[m];
        }
        for (int m = 0; m < M; m++) y[(size_t)m * n + t] = z[m] / sum;
    }
}

static double *episodes(size_t n, double first) {
    double *x = malloc((n ? n : 1) * sizeof *x);
    if (!x) abort();
    for (size_t i = 0; i < n; i++) x[i] = first + (double)i;
    return x;
}

/* ---- structure ----------------------------------------------------------------------- */

static void test_document_structure_and_escaping(void) {
    enum { M = 5, N = 60 };
    static const char *names[M] = {"web", "code & math", "<books>", "say \"hi\"", "it's α"};
    static const char *escaped[M] = {"web", "code &amp; math", "&lt;books&gt;",
                                     "say &quot;hi&quot;", "it&apos;s α"};
    double *x = episodes(N, 1), y[M * N];
    alpha_fill(y, M, N);
    svgplot_series s[M];
    for (int m = 0; m < M; m++) s[m] = (svgplot_series){names[m], y + m * N};
    svgplot p = {.title = "Mixture weights α & co",
                 .xlabel = "episode",
                 .ylabel = "α (domain weight)",
                 .x = x,
                 .n = N,
                 .series = s,
                 .nseries = M};
    char *svg = render(&p);
    free(x);
    CHECK(svg, "render failed");
    const char *head =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"";
    int ok = !strncmp(svg, head, strlen(head));
    ok = ok && strstr(svg, "width=\"900\" height=\"500\" viewBox=\"0 0 900 500\"");
    ok = ok && strstr(svg, "<rect class=\"background\"") && strstr(svg, "fill=\"#ffffff\"");
    size_t polylines = count(svg, "<polyline"), groups = count(svg, "<g class=\"series\"");
    size_t items = count(svg, "<g class=\"legend-item\"");
    size_t circles = count(svg, "<circle");
    int names_ok = 1, raw_bad = 0;
    for (int m = 0; m < M; m++) {
        names_ok &= count(svg, escaped[m]) >= 2; /* legend text and tooltip */
        raw_bad |= m > 0 && strstr(svg, names[m]) != NULL;
    }
    int labels = strstr(svg, ">episode</text>") && strstr(svg, ">α (domain weight)</text>") &&
                 strstr(svg, ">Mixture weights α &amp; co</text>");
    char *texts = xml_texts(svg);
    int texts_ok = texts != NULL;
    for (int m = 0; texts && m < M; m++) texts_ok &= has_line(texts, names[m]);
    texts_ok = texts_ok && has_line(texts, "α (domain weight)") && has_line(texts, "episode");
    free(texts);
    free(svg);
    CHECK(ok, "header, size, viewBox or background missing");
    CHECK(polylines == M && groups == M, "%zu polylines in %zu series groups, want %d",
          polylines, groups, M);
    CHECK(items == M, "%zu legend items, want %d", items, M);
    CHECK(circles == 0, "%zu markers for n = %d > %d", circles, N, SVGPLOT_MARKER_MAX_N);
    CHECK(names_ok, "a series name is missing or not escaped");
    CHECK(!raw_bad, "a series name appears unescaped");
    CHECK(labels, "axis labels or title missing (or α not written as UTF-8)");
    CHECK(texts_ok, "the parsed document lacks a name or label (see above)");
}

static void test_ticks_are_round_and_episodes_whole(void) {
    struct {
        size_t n;
        double first;
    } cases[] = {{3, 1}, {12, 1}, {101, 0}, {1000, 1}, {37, 250}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = cases[c].n;
        double *x = episodes(n, cases[c].first), *y = malloc(2 * n * sizeof *y);
        if (!y) abort();
        alpha_fill(y, 2, n);
        svgplot_series s[2] = {{"a", y}, {"b", y + n}};
        svgplot p = {
            .xlabel = "episode", .ylabel = "α", .x = x, .n = n, .series = s, .nseries = 2};
        char *svg = render(&p);
        free(x);
        free(y);
        CHECK(svg, "render failed");
        double xt[200], yt[200];
        int xc, yc;
        int nx = tick_values(svg, "xtick", xt, 200, &xc),
            ny = tick_values(svg, "ytick", yt, 200, &yc);
        free(svg);
        CHECK(!xc && !yc, "case %zu: a tick label has a comma", c);
        CHECK(nx >= 3 && nx <= 12, "case %zu: %d x ticks", c, nx);
        CHECK(ny >= 3 && ny <= 12, "case %zu: %d y ticks", c, ny);
        double last = cases[c].first + (double)n - 1;
        CHECK(xt[0] >= cases[c].first && xt[nx - 1] <= last,
              "case %zu: x ticks %g..%g outside %g..%g", c, xt[0], xt[nx - 1], cases[c].first,
              last);
        double dx = xt[1] - xt[0], dy = yt[1] - yt[0];
        CHECK(is_nice(dx) && dx >= 1, "case %zu: x step %g", c, dx);
        CHECK(is_nice(dy), "case %zu: y step %g", c, dy);
        for (int i = 0; i < nx; i++) {
            CHECK(xt[i] == floor(xt[i]), "case %zu: x tick %g is not a whole episode", c,
                  xt[i]);
            CHECK(i == 0 || fabs(xt[i] - xt[i - 1] - dx) < 1e-9, "case %zu: uneven x ticks", c);
        }
        for (int i = 1; i < ny; i++)
            CHECK(fabs(fabs(yt[i] - yt[i - 1]) - fabs(dy)) < 1e-9, "case %zu: uneven y ticks",
                  c);
        /* the data (all in (0, 1)) must lie inside the fitted y range */
        CHECK(yt[0] >= 0 && yt[ny - 1] <= 1, "case %zu: y ticks %g..%g", c, yt[0], yt[ny - 1]);
    }
}

static void test_gaps_break_lines(void) {
    enum { N = 60 };
    double y[N], lone[N];
    for (int i = 0; i < N; i++) y[i] = lone[i] = 0.5 + 0.01 * i;
    y[10] = NAN;      /* run 0..9 | 11..29 | ... */
    y[30] = INFINITY; /* ... | 31..49 | 51 (alone) | 53..59 */
    y[50] = -INFINITY;
    y[52] = NAN;
    for (int i = 0; i < N; i++)
        if (i != 20) lone[i] = NAN; /* only one point */
    svgplot_series s[2] = {{"gappy", y}, {"lone", lone}};
    svgplot p = {.n = N, .series = s, .nseries = 2};
    char *svg = render(&p);
    CHECK(svg, "render failed");
    char *texts = xml_texts(svg);
    size_t polylines = count(svg, "<polyline"), circles = count(svg, "<circle");
    int finite = !strstr(svg, "nan") && !strstr(svg, "inf");
    free(svg);
    CHECK(texts, "not well-formed");
    free(texts);
    CHECK(polylines == 4, "%zu polylines, want 4 runs", polylines);
    CHECK(circles == 2, "%zu markers, want 2 (the lone points)", circles);
    CHECK(finite, "a non-finite number reached the SVG");
}

static void test_markers_up_to_threshold(void) {
    for (size_t n = SVGPLOT_MARKER_MAX_N; n <= SVGPLOT_MARKER_MAX_N + 1; n++) {
        double *x = episodes(n, 1), *y = malloc(3 * n * sizeof *y);
        if (!y) abort();
        alpha_fill(y, 3, n);
        svgplot_series s[3] = {{"a", y}, {"b", y + n}, {"c", y + 2 * n}};
        svgplot p = {.x = x, .n = n, .series = s, .nseries = 3};
        char *svg = render(&p);
        free(x);
        free(y);
        CHECK(svg, "render failed");
        size_t circles = count(svg, "<circle"), polylines = count(svg, "<polyline");
        free(svg);
        size_t want = n <= SVGPLOT_MARKER_MAX_N ? 3 * n + 3 : 0; /* + one per legend item */
        CHECK(circles == want, "n = %zu: %zu markers, want %zu", n, circles, want);
        CHECK(polylines == 3, "n = %zu: %zu polylines", n, polylines);
    }
}

static void test_single_point(void) {
    double x = 1, y[3] = {0.2, 0.3, 0.5};
    svgplot_series s[3] = {{"a", y}, {"b", y + 1}, {"c", y + 2}};
    svgplot p = {
        .title = "one", .xlabel = "episode", .x = &x, .n = 1, .series = s, .nseries = 3};
    char *svg = render(&p);
    CHECK(svg, "render failed");
    char *texts = xml_texts(svg);
    double xt[50];
    int comma, nx = tick_values(svg, "xtick", xt, 50, &comma);
    size_t circles = count(svg, "<circle"), polylines = count(svg, "<polyline");
    free(svg);
    CHECK(texts, "not well-formed");
    free(texts);
    CHECK(circles == 6 && polylines == 0, "%zu markers and %zu polylines for one point",
          circles, polylines);
    int has1 = 0;
    for (int i = 0; i < nx; i++) has1 |= xt[i] == 1;
    CHECK(has1, "episode 1 has no tick (%d ticks)", nx);
}

static void test_no_episodes(void) {
    svgplot_series s[2] = {{"a", NULL}, {"b", NULL}};
    svgplot p = {.title = "α", .xlabel = "episode", .n = 0, .series = s, .nseries = 2};
    char *svg = render(&p);
    CHECK(svg, "render failed");
    char *texts = xml_texts(svg);
    size_t polylines = count(svg, "<polyline");
    free(svg);
    CHECK(texts, "not well-formed");
    int says = has_line(texts, "no episodes yet");
    free(texts);
    CHECK(says, "the empty plot does not say \"no episodes yet\"");
    CHECK(polylines == 0, "%zu polylines in an empty plot", polylines);
}

static void test_constant_and_fixed_range(void) {
    enum { N = 50 };
    double y[N], big[N];
    for (int i = 0; i < N; i++) y[i] = 0.25, big[i] = 7;
    svgplot_series s[1] = {{"flat", y}};
    svgplot p = {.n = N, .series = s, .nseries = 1};
    char *svg = render(&p);
    CHECK(svg, "render failed");
    double yt[50];
    int comma, ny = tick_values(svg, "ytick", yt, 50, &comma);
    int finite = !strstr(svg, "nan") && !strstr(svg, "inf");
    size_t polylines = count(svg, "<polyline");
    free(svg);
    CHECK(finite && polylines == 1, "constant series: %zu polylines, finite %d", polylines,
          finite);
    CHECK(ny >= 2 && yt[0] < 0.25 && yt[ny - 1] > 0.25, "constant 0.25 not inside ticks %g..%g",
          ny ? yt[0] : 0, ny ? yt[ny - 1] : 0);

    /* a fixed range [0, 1] with data far outside: drawn (clipped), ticks 0..1 */
    s[0].y = big;
    p.ymin = 0;
    p.ymax = 1;
    svg = render(&p);
    CHECK(svg, "render failed");
    ny = tick_values(svg, "ytick", yt, 50, &comma);
    char *texts = xml_texts(svg);
    free(svg);
    CHECK(texts, "not well-formed");
    free(texts);
    CHECK(ny >= 3 && yt[0] == 0 && yt[ny - 1] == 1, "fixed range ticks %g..%g (%d)", yt[0],
          yt[ny - 1], ny);
}

static void test_many_series_legend(void) {
    enum { M = 64, N = 30 };
    double *x = episodes(N, 1), y[M * N];
    alpha_fill(y, M, N);
    char names[M][32];
    svgplot_series s[M];
    for (int m = 0; m < M; m++) {
        snprintf(names[m], sizeof names[m], "domain-%02d", m);
        s[m] = (svgplot_series){names[m], y + m * N};
    }
    svgplot p = {.title = "64",
                 .xlabel = "episode",
                 .ylabel = "α",
                 .x = x,
                 .n = N,
                 .series = s,
                 .nseries = M};
    char *svg = render(&p);
    free(x);
    CHECK(svg, "render failed");
    char *texts = xml_texts(svg);
    int all = texts != NULL;
    for (int m = 0; texts && m < M; m++) all &= has_line(texts, names[m]);
    free(texts);
    /* every series styled differently: (colour, dash) of each polyline's attributes */
    char styles[M][96];
    int nstyles = 0, dup = 0;
    for (const char *q = strstr(svg, "<polyline"); q; q = strstr(q + 1, "<polyline")) {
        const char *st = strstr(q, "stroke=\""), *pts = strstr(q, " points=");
        if (!st || !pts || nstyles >= M) break;
        size_t len = (size_t)(pts - st) < 95 ? (size_t)(pts - st) : 95;
        memcpy(styles[nstyles], st, len);
        styles[nstyles][len] = '\0';
        for (int k = 0; k < nstyles; k++) dup |= !strcmp(styles[k], styles[nstyles]);
        nstyles++;
    }
    /* the legend box must lie inside the document */
    int W = 0, H = 0;
    double lx = -1, ly = -1, lw = 0, lh = 0;
    const char *root = strstr(svg, "<svg ");
    const char *box = strstr(svg, "class=\"legend-box\"");
    int parsed =
        root && sscanf(strstr(root, "width="), "width=\"%d\" height=\"%d\"", &W, &H) == 2 &&
        box &&
        sscanf(box, "class=\"legend-box\" x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\"",
               &lx, &ly, &lw, &lh) == 4;
    size_t items = count(svg, "<g class=\"legend-item\"");
    free(svg);
    CHECK(all, "a series name is missing from the parsed document");
    CHECK(nstyles == M && !dup, "%d polyline styles, duplicate %d", nstyles, dup);
    CHECK(items == M, "%zu legend items", items);
    CHECK(parsed, "cannot read the size or the legend box");
    CHECK(lx >= 0 && ly >= 0 && lx + lw <= W && ly + lh <= H,
          "legend box %g,%g %gx%g outside the %dx%d document", lx, ly, lw, lh, W, H);
}

static void test_bad_text_is_replaced(void) {
    double y[2] = {0.1, 0.2};
    /* invalid UTF-8, a control character, an overlong '/', a surrogate, U+FFFF */
    svgplot_series s[1] = {{"a\xff"
                            "b\x01"
                            "c\xc0\xaf"
                            "d\xed\xa0\x80"
                            "e\xef\xbf\xbf",
                            y}};
    svgplot p = {.title = "t\x02", .n = 2, .series = s, .nseries = 1};
    char *svg = render(&p);
    CHECK(svg, "render failed");
    char *texts = xml_texts(svg);
    int has = strstr(svg, "a\xEF\xBF\xBD"
                          "b\xEF\xBF\xBD"
                          "c") != NULL;
    free(svg);
    CHECK(texts, "invalid text made the document ill-formed");
    free(texts);
    CHECK(has, "invalid bytes not replaced by U+FFFD");
}

static void test_long_texts_are_cut(void) {
    double y[2] = {0.1, 0.2};
    const char *longname = "a-very-long-domain-name-that-goes-on-and-on-αβγ-forever";
    char title[400];
    memset(title, 'W', sizeof title - 1);
    title[sizeof title - 1] = '\0';
    svgplot_series s[1] = {{longname, y}};
    svgplot p = {.title = title, .n = 2, .series = s, .nseries = 1};
    char *svg = render(&p);
    CHECK(svg, "render failed");
    int full = count(svg, longname) == 2;             /* the two tooltips */
    int cut = count(svg, "\xE2\x80\xA6</text>") == 1; /* the title: its start kept */
    /* the legend: a name keeps its start and its end (28 characters in all) */
    int mid = count(svg, ">a-very-long-d\xE2\x80\xA6on-\xCE\xB1\xCE\xB2\xCE\xB3-forever</text>") == 1;
    int whole_title = count(svg, title) == 1;         /* the document's <title> */
    free(svg);
    CHECK(full && cut && mid, "long name: full in tooltips %d, title cut at its end %d, name in the middle %d",
          full, cut, mid);
    CHECK(whole_title, "the long title is not whole in the document's <title>");
}

/* Long names that share a prefix (slimpajama_..._shard_a, _b, _c: up to 64 characters)
 * stay apart where they are cut: in the legend (28 characters) and as a bar chart's
 * category labels (the room of their group); before, all three read
 * "slimpajama_commoncrawl_2023…". */
static void test_cut_names_stay_apart(void) {
    double y[3] = {0.1, 0.2, 0.3};
    const char *names[3] = {"slimpajama_commoncrawl_2023_dedup_shard_a", "slimpajama_commoncrawl_2023_dedup_shard_b",
                            "slimpajama_commoncrawl_2023_dedup_shard_c"};
    svgplot_series s[3] = {{names[0], y}, {names[1], y}, {names[2], y}};
    for (int bars = 0; bars < 2; bars++) {
        svgplot p = {.title = "t", .n = 3, .series = s, .nseries = 3, .categories = bars ? names : NULL};
        char *svg = render(&p);
        CHECK(svg, "render failed");
        /* the visible text of each legend entry (lines) or x tick (bars): after the "…" */
        const char *open = bars ? "<text class=\"xtick\"" : "<g class=\"legend-item\">";
        char seen[3][128];
        int k = 0, cut = 0;
        for (const char *q = strstr(svg, open); q && k < 3; q = strstr(q + 1, open)) {
            const char *t = strstr(q, bars ? ">" : "<text");
            if (!bars && t) t = strchr(t, '>');
            const char *end = t ? strstr(t, "</text>") : NULL;
            if (!end) break;
            snprintf(seen[k], sizeof seen[k], "%.*s", (int)(end - t - 1), t + 1);
            cut += strstr(seen[k], "\xE2\x80\xA6") != NULL;
            k++;
        }
        free(svg);
        CHECK(k == 3, "%s: %d labels found", bars ? "bars" : "legend", k);
        CHECK(cut == 3, "%s: the names were not cut (%d), the case is not tested", bars ? "bars" : "legend", cut);
        CHECK(strcmp(seen[0], seen[1]) && strcmp(seen[1], seen[2]) && strcmp(seen[0], seen[2]),
              "%s: labels alike: '%s' '%s' '%s'", bars ? "bars" : "legend", seen[0], seen[1], seen[2]);
    }
}

/* Switches LC_NUMERIC to a locale whose decimal point is a comma and returns its name;
 * NULL when there is none. Machines rarely have one generated (Debian's `locales` ships
 * only the sources), so when that is so and localedef and the de_DE source are present,
 * one is built in a scratch directory (*dir, to remove) and found through LOCPATH. */
static const char *comma_locale(char **dir) {
    static const char *names[] = {"de_DE.UTF-8", "de_DE.utf8",  "fr_FR.UTF-8",
                                  "fr_FR.utf8",  "ru_RU.UTF-8", "nl_NL.UTF-8"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (setlocale(LC_NUMERIC, names[i]) && localeconv()->decimal_point[0] == ',')
            return names[i];
    if (access("/usr/bin/localedef", X_OK) != 0 ||
        access("/usr/share/i18n/locales/de_DE", R_OK) != 0)
        return NULL;
    *dir = test_tmpdir("svglocale");
    char out[4200];
    snprintf(out, sizeof out, "%s/de_DE.UTF-8", *dir);
    char *argv[] = {"/usr/bin/localedef", "-i", "de_DE", "-f", "UTF-8", out, NULL};
    if (run_argv(argv) != 0) return NULL; /* warnings exit 1; then it is unusable anyway */
    setenv("LOCPATH", *dir, 1);
    if (setlocale(LC_NUMERIC, "de_DE.UTF-8") && localeconv()->decimal_point[0] == ',')
        return "de_DE.UTF-8 (built here)";
    return NULL;
}

static void test_deterministic_and_locale_free(void) {
    enum { M = 4, N = 25 };
    double *x = episodes(N, 0), y[M * N];
    alpha_fill(y, M, N);
    svgplot_series s[M] = {{"a", y}, {"b", y + N}, {"c", y + 2 * N}, {"d", y + 3 * N}};
    svgplot p = {.title = "t",
                 .xlabel = "episode",
                 .ylabel = "α",
                 .x = x,
                 .n = N,
                 .series = s,
                 .nseries = M};
    char *a = render(&p), *b = render(&p);
    /* a locale with a decimal comma must change nothing */
    char *locdir = NULL;
    const char *used = comma_locale(&locdir);
    char *c = used ? render(&p) : NULL;
    setlocale(LC_NUMERIC, "C");
    if (locdir) {
        unsetenv("LOCPATH");
        test_rmtree(locdir);
        free(locdir);
    }
    free(x);
    int same_ab = a && b && !strcmp(a, b);
    int same_ac = !used || (a && c && !strcmp(a, c));
    free(a);
    free(b);
    free(c);
    if (!used)
        printf("  note: no decimal-comma locale could be had; the C locale alone was used\n");
    CHECK(same_ab, "two renders of the same plot differ");
    CHECK(same_ac, "the output changed under LC_NUMERIC=%s", used);
    if (used) printf("  output identical under LC_NUMERIC=%s\n", used);
}

static void test_errors(void) {
    tdm_err e = {0};
    double y[3] = {1, 2, 3};
    svgplot_series s[1] = {{"a", NULL}};
    svgplot p = {.n = 3, .series = s, .nseries = 1};
    CHECK(svgplot_render(&p, NULL, &e) == NULL && e.code == ERR_INTERNAL, "NULL y accepted");
    s[0].y = y;
    p.ymin = 1;
    p.ymax = 0;
    CHECK(svgplot_render(&p, NULL, &e) == NULL && e.code == ERR_USAGE, "ymin > ymax accepted");
    p.ymin = 0;
    p.ymax = NAN;
    CHECK(svgplot_render(&p, NULL, &e) == NULL && e.code == ERR_USAGE, "NaN ymax accepted");
    p.ymax = 0;
    p.width = 50;
    CHECK(svgplot_render(&p, NULL, &e) == NULL && e.code == ERR_USAGE, "width 50 accepted");
    p.width = 0;
    double huge[2] = {-1e308, 1e308};
    svgplot_series hs[1] = {{"h", huge}};
    svgplot ph = {.n = 2, .series = hs, .nseries = 1};
    CHECK(svgplot_render(&ph, NULL, &e) == NULL && e.code == ERR_USAGE,
          "overflowing range accepted");
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        err_clear(&e);
        int rc = svgplot_write(&p, full, &e);
        fclose(full);
        CHECK(rc == ERR_USAGE && strstr(e.msg, "writing"), "write to /dev/full: %d %s", rc,
              e.msg);
    }
    /* svgplot_write to a real file gives the same bytes as svgplot_render */
    FILE *tmp = tmpfile();
    CHECK(tmp, "tmpfile");
    size_t len = 0;
    char *doc = svgplot_render(&p, &len, &e);
    int rc = svgplot_write(&p, tmp, &e);
    long size = ftell(tmp);
    fclose(tmp);
    free(doc);
    CHECK(doc && rc == 0 && size == (long)len, "write %d: %ld bytes, render %zu", rc, size,
          len);
}

/* ---- rendering in Chromium ----------------------------------------------------------- */

/* Writes svg to DIR/NAME.svg, renders it with tests/svg/render.py --check. 0 when the
 * picture passes; says why otherwise. */
static int render_check(const char *dir, const char *name, const char *svg_text) {
    if (python_ready() != 0) return -1;
    if (access(CHROMIUM, X_OK) != 0) {
        fprintf(stderr,
                "  %s not found: the render test needs Debian's chromium; run "
                "`scripts/deps.sh test` (or `make test`, which runs it)\n",
                CHROMIUM);
        return -1;
    }
    char svg[4200], png[4200], script[4200];
    snprintf(svg, sizeof svg, "%s/%s.svg", dir, name);
    snprintf(png, sizeof png, "%s/%s.png", dir, name);
    snprintf(script, sizeof script, "%s/tests/svg/render.py", repo_root());
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "  %s not found: run from the repository root or set TANDEM_ROOT\n",
                script);
        return -1;
    }
    if (write_text(svg, svg_text) != 0) {
        fprintf(stderr, "  cannot write %s\n", svg);
        return -1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *argv[] = {PYTHON, script, "--check", svg, png, NULL};
    int st = run_argv(argv);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %s: rendered and checked in %.1f s\n", name,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    const char *keep = getenv("TANDEM_SVGPLOT_OUT");
    if (keep && *keep) {
        char *cp[] = {"/bin/cp", svg, png, (char *)keep, NULL};
        if (run_argv(cp) != 0) fprintf(stderr, "  could not copy the pictures to %s\n", keep);
    }
    if (st != 0) fprintf(stderr, "  render.py --check %s failed (exit %d)\n", svg, st);
    return st == 0 ? 0 : -1;
}

static void test_renders_in_chromium(void) {
    enum { M = 6, N = 120 };
    static const char *names[M] = {"web",       "code", "books & papers",
                                   "wiki <en>", "math", "dialogue"};
    double *x = episodes(N, 1), y[M * N];
    alpha_fill(y, M, N);
    for (int t = 70; t < 74; t++) y[2 * N + t] = NAN; /* a gap in one series */
    svgplot_series s[M];
    for (int m = 0; m < M; m++) s[m] = (svgplot_series){names[m], y + m * N};
    svgplot p = {.title = "Mixture weights α(t) per domain",
                 .xlabel = "episode",
                 .ylabel = "α (domain weight)",
                 .x = x,
                 .n = N,
                 .series = s,
                 .nseries = M};
    char *svg = render(&p);
    free(x);
    CHECK(svg, "render failed");
    char *dir = test_tmpdir("svgplot");
    int rc = render_check(dir, "alpha", svg);
    free(svg);
    test_rmtree(dir);
    free(dir);
    CHECK(rc == 0, "the plot did not render as expected (see above)");
}

static void test_renders_many_series_in_chromium(void) {
    enum { M = 64, N = 30 };
    double *x = episodes(N, 1), y[M * N];
    alpha_fill(y, M, N);
    char names[M][32];
    svgplot_series s[M];
    for (int m = 0; m < M; m++) {
        snprintf(names[m], sizeof names[m], "domain-%02d", m);
        s[m] = (svgplot_series){names[m], y + m * N};
    }
    svgplot p = {.title = "Mixture weights α(t), 64 domains",
                 .xlabel = "episode",
                 .ylabel = "α (domain weight)",
                 .x = x,
                 .n = N,
                 .series = s,
                 .nseries = M};
    char *svg = render(&p);
    free(x);
    CHECK(svg, "render failed");
    char *dir = test_tmpdir("svgplot");
    int rc = render_check(dir, "alpha64", svg);
    free(svg);
    test_rmtree(dir);
    free(dir);
    CHECK(rc == 0, "the 64-series plot did not render as expected (see above)");
}

int main(void) {
    RUN(test_document_structure_and_escaping);
    RUN(test_ticks_are_round_and_episodes_whole);
    RUN(test_gaps_break_lines);
    RUN(test_markers_up_to_threshold);
    RUN(test_single_point);
    RUN(test_no_episodes);
    RUN(test_constant_and_fixed_range);
    RUN(test_cut_names_stay_apart);
    RUN(test_many_series_legend);
    RUN(test_bad_text_is_replaced);
    RUN(test_long_texts_are_cut);
    RUN(test_deterministic_and_locale_free);
    RUN(test_errors);
    RUN(test_renders_in_chromium);
    RUN(test_renders_many_series_in_chromium);
    return test_summary("test_svgplot");
}
