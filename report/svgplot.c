/* svgplot.c — SVG line plots; see svgplot.h.
 *
 * The document is built in memory (so svgplot_write never leaves half a file behind on an
 * error in the input) in three steps: fit the ranges, lay out margins and legend from
 * estimated text widths, then emit grid, axes, series and legend in painting order.
 */
#include "report/svgplot.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

/* ---- Look ---------------------------------------------------------------------------- */

#define SVGPLOT_FONTS "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
/* Font sizes in px: whole numbers, as they are written with %d. */
#define SVGPLOT_FONT_TICK 12
#define SVGPLOT_FONT_LABEL 14
#define SVGPLOT_FONT_TITLE 18
#define SVGPLOT_FONT_LEGEND 12
/* Text widths are estimated (an SVG writer cannot measure) from DejaVu Sans advances by
 * class of character, 5% wide so that a wider fallback font still fits. */
#define SVGPLOT_WIDTH_SLACK 1.05
#define SVGPLOT_EDGE 14.0 /* blank border around everything */
#define SVGPLOT_TICK_LEN 5.0
#define SVGPLOT_INSET 6.0  /* data never touches the axes, so a marker is never cut */
#define SVGPLOT_ROW_H 18.0 /* legend row */
#define SVGPLOT_SAMPLE_W 28.0
#define SVGPLOT_LEG_PAD 8.0
#define SVGPLOT_LEG_GAP 16.0   /* between legend columns */
#define SVGPLOT_NAME_MAX_CP 28 /* longer names are cut in the middle in the legend (full in <title>) */
#define SVGPLOT_MARKER_R "3.5" /* px, a string as it goes into the attribute */

/* Okabe & Ito's colour-blind-safe palette, minus its yellow (#F0E442), which is all but
 * invisible as a thin line on white; black comes last so it is not mistaken for an axis
 * when there are few series. */
static const char *const svgplot_palette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                              "#CC79A7", "#56B4E9", "#000000"};
#define SVGPLOT_NCOLOURS ((int)(sizeof svgplot_palette / sizeof svgplot_palette[0]))

/* Dash pattern of each pass through the palette: 7 × 10 distinct styles, so 64 series
 * all look different. */
static const char *const svgplot_dashes[] = {
    NULL, "8 4", "2 3", "10 3 2 3", "4 4", "14 3 3 3 3 3", "1 4", "7 2 2 2", "16 5", "3 7",
};
#define SVGPLOT_NDASHES ((int)(sizeof svgplot_dashes / sizeof svgplot_dashes[0]))

/* ---- Output buffer ------------------------------------------------------------------- */

/* util/buf.h's buf_printf is used only for %s and integer conversions, which no locale
 * changes; real numbers are turned into text by svgplot_px / svgplot_ticktext first. */

/* ---- Numbers as text ----------------------------------------------------------------- */

/* Returned by value so several can appear in one svgplot_printf call: the temporary
 * lives until the end of the full expression (C11 6.2.4p8). */
typedef struct svgplot_str {
    char s[48];
} svgplot_str;

/* A pixel coordinate to 1/100 px with trailing zeros dropped. Integer arithmetic only,
 * so no locale can turn the point into a comma. */
static svgplot_str svgplot_px(double v) {
    svgplot_str r;
    if (!(v > -1e9)) v = -1e9; /* also NaN; callers clamp earlier, this keeps llround defined */
    if (v > 1e9) v = 1e9;
    long long c = llround(v * 100.0);
    unsigned long long a = c < 0 ? (unsigned long long)(-c) : (unsigned long long)c;
    const char *sign = c < 0 ? "-" : "";
    unsigned long long ip = a / 100, fp = a % 100;
    if (fp == 0)
        snprintf(r.s, sizeof r.s, "%s%llu", sign, ip);
    else if (fp % 10 == 0)
        snprintf(r.s, sizeof r.s, "%s%llu.%llu", sign, ip, fp / 10);
    else
        snprintf(r.s, sizeof r.s, "%s%llu.%02llu", sign, ip, fp);
    return r;
}

/* Crisp 1-px lines: a coordinate on the centre of a pixel. */
static double svgplot_crisp(double v) { return floor(v) + 0.5; }

/* ---- Text ---------------------------------------------------------------------------- */

/* Length in bytes of the character at s when it is valid UTF-8 that XML 1.0 allows in
 * text (no C0 controls but tab/newline/CR, no surrogates, no U+FFFE/U+FFFF, nothing past
 * U+10FFFF, no overlong forms); 0 otherwise. s is NUL-terminated, which stops the
 * look-ahead since NUL is never a continuation byte. */
static size_t svgplot_utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    if (c < 0x80) return (c >= 0x20 || c == '\t' || c == '\n' || c == '\r') ? 1 : 0;
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0; /* overlong */
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90; /* overlong */
        if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else
        return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    if (c == 0xEF && s[1] == 0xBF && (s[2] == 0xBE || s[2] == 0xBF)) return 0; /* U+FFFE/F */
    return n;
}

/* Number of characters svgplot_text writes for s (each invalid byte counts as one). */
static size_t svgplot_cp_count(const char *s) {
    size_t n = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u; n++) {
        size_t k = svgplot_utf8_len(u);
        u += k ? k : 1;
    }
    return n;
}

/* How s is cut to max_cp characters (0: whole): the first `head` characters, "…", then the
 * characters from `tail` on. A title or axis label keeps its start; a name (mid = 1: a
 * legend entry, a bar's label) keeps its start and its end around a "…" in the middle, so
 * long names sharing a prefix (slimpajama_..._shard_a, _b) stay apart. */
static int svgplot_cut(size_t total, size_t max_cp, int mid, size_t *head, size_t *tail) {
    if (!(max_cp > 0 && total > max_cp)) {
        *head = *tail = total;
        return 0;
    }
    size_t keep = max_cp - 1;
    *head = mid ? keep / 2 : keep;
    *tail = total - (keep - *head);
    return 1;
}

/* Appends s XML-escaped, each invalid byte replaced by U+FFFD so the document always
 * parses. max_cp > 0: at most max_cp characters, with "…" where s is cut (svgplot_cut). */
static void svgplot_text_cut(buf_t *b, const char *s, size_t max_cp, int mid) {
    size_t total = svgplot_cp_count(s), head, tail;
    int cut = svgplot_cut(total, max_cp, mid, &head, &tail);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < total; i++) {
        size_t k = svgplot_utf8_len(u);
        if (cut && i == head) buf_puts(b, "\xE2\x80\xA6"); /* … */
        if (i >= head && i < tail) {
            u += k ? k : 1;
            continue;
        }
        if (k == 0) {
            buf_puts(b, "\xEF\xBF\xBD");
            u++;
            continue;
        }
        switch (*u) {
        case '&': buf_puts(b, "&amp;"); break;
        case '<': buf_puts(b, "&lt;"); break;
        case '>': buf_puts(b, "&gt;"); break;
        case '"': buf_puts(b, "&quot;"); break;
        case '\'': buf_puts(b, "&apos;"); break;
        default: buf_putn(b, (const char *)u, k);
        }
        u += k;
    }
    if (cut && head == total) buf_puts(b, "\xE2\x80\xA6");
}

static void svgplot_text(buf_t *b, const char *s, size_t max_cp) { svgplot_text_cut(b, s, max_cp, 0); }

/* Advance of one character in em (DejaVu Sans, rounded up within its class). */
static double svgplot_char_em(unsigned c) {
    if (c >= 0x80) return 0.70; /* Greek, accented Latin, "…", U+FFFD: wide enough */
    if (c == 0) return 0;       /* strchr would match the terminator */
    if (strchr("il.,:;!'|", (int)c)) return 0.32;
    if (strchr("ftrjI-()[] /", (int)c)) return 0.42;
    if (strchr("mwMW%@", (int)c)) return 0.98;
    if (c >= 'A' && c <= 'Z') return 0.78;
    return 0.64; /* digits and the rest of the lower case */
}

/* Estimated width in px of s at `font` px, cut to max_cp characters as svgplot_text_cut
 * cuts it (0: whole). */
static double svgplot_text_w_cut(const char *s, size_t max_cp, double font, int mid) {
    size_t total = svgplot_cp_count(s), head, tail;
    int cut = svgplot_cut(total, max_cp, mid, &head, &tail);
    double em = cut ? svgplot_char_em(0x2026) : 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < total; i++) {
        size_t k = svgplot_utf8_len(u);
        if (i < head || i >= tail) em += svgplot_char_em(k ? *u : 0xFFFD);
        u += k ? k : 1;
    }
    return em * font * SVGPLOT_WIDTH_SLACK;
}

static double svgplot_text_w(const char *s, size_t max_cp, double font) {
    return svgplot_text_w_cut(s, max_cp, font, 0);
}

static int svgplot_has(const char *s) { return s && *s; }

/* The max_cp for svgplot_text that keeps s within `avail` px (0: s fits whole), so a long
 * title or label is cut with "…" rather than running off the picture. */
static size_t svgplot_fit_cp_cut(const char *s, double avail, double font, int mid) {
    if (svgplot_text_w_cut(s, 0, font, mid) <= avail) return 0;
    size_t cp = svgplot_cp_count(s);
    while (cp > 2 && svgplot_text_w_cut(s, cp, font, mid) > avail) cp--;
    return cp;
}

static size_t svgplot_fit_cp(const char *s, double avail, double font) { return svgplot_fit_cp_cut(s, avail, font, 0); }

/* ---- Axes ---------------------------------------------------------------------------- */

typedef struct svgplot_axis {
    double lo, hi;    /* data range mapped onto the axis */
    double step;      /* tick spacing: 1, 2 or 5 × 10^k */
    long long k0, k1; /* ticks at k·step for k in [k0, k1] */
    int decimals;     /* digits after the point in tick labels; -1: %.*g with `sig` */
    int sig;
} svgplot_axis;

/* The smallest of 1, 2, 5 × 10^k that is >= raw (> 0). */
static double svgplot_nice(double raw) {
    double p = pow(10.0, floor(log10(raw)));
    double f = raw / p;
    double m = f <= 1 + 1e-9 ? 1 : f <= 2 + 1e-9 ? 2 : f <= 5 + 1e-9 ? 5 : 10;
    return m * p;
}

/* True when [lo, hi] is too narrow to be told apart from one value (relative to its
 * magnitude, or absolutely tiny, where pow/log10 would go subnormal). */
static int svgplot_degenerate(double lo, double hi) {
    double mag = fmax(fabs(lo), fabs(hi));
    return hi - lo <= 1e-12 * mag || hi - lo < 1e-200;
}

/* Sets the step and the tick indices and label format for axis range [lo, hi]. */
static void svgplot_set_step(svgplot_axis *a, double step) {
    a->step = step;
    double k0 = ceil(a->lo / step - 1e-9), k1 = floor(a->hi / step + 1e-9);
    if (!(fabs(k0) < 1e15 && fabs(k1) < 1e15) || k1 - k0 > 1000) { /* no sane ticks */
        a->k0 = 1;
        a->k1 = 0;
    } else {
        a->k0 = (long long)k0;
        a->k1 = (long long)k1;
    }
    double mag = fmax(fabs(a->lo), fabs(a->hi));
    if (mag < 1e9 && step >= 1e-9) {
        a->decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    } else {
        a->decimals = -1;
        int sig = (int)(floor(log10(fmax(mag, step))) - floor(log10(step))) + 1;
        a->sig = sig < 1 ? 1 : sig > 17 ? 17 : sig;
    }
}

static double svgplot_tick(const svgplot_axis *a, long long k) {
    double v = (double)k * a->step;
    return fabs(v) < a->step * 1e-9 ? 0.0 : v; /* no "-0" */
}

/* A tick label. Should anyone have called setlocale, whatever the locale put between
 * the digits is turned back into '.', so labels are the same everywhere. */
static svgplot_str svgplot_ticktext(const svgplot_axis *a, double v) {
    svgplot_str t, r;
    if (a->decimals >= 0)
        snprintf(t.s, sizeof t.s, "%.*f", a->decimals, v);
    else
        snprintf(t.s, sizeof t.s, "%.*g", a->sig, v);
    size_t o = 0;
    for (const char *c = t.s; *c && o + 1 < sizeof r.s;) {
        if ((*c >= '0' && *c <= '9') || *c == '-' || *c == '+' || *c == 'e') {
            r.s[o++] = *c++;
        } else {
            r.s[o++] = '.';
            while (*c && !((*c >= '0' && *c <= '9') || *c == '-' || *c == '+' || *c == 'e'))
                c++;
        }
    }
    r.s[o] = '\0';
    return r;
}

/* Width in px of the widest tick label of the axis. */
static double svgplot_widest_tick(const svgplot_axis *a) {
    double w = 0;
    for (long long k = a->k0; k <= a->k1; k++)
        w = fmax(
            w, svgplot_text_w(svgplot_ticktext(a, svgplot_tick(a, k)).s, 0, SVGPLOT_FONT_TICK));
    return w;
}

/* ---- The plot ------------------------------------------------------------------------ */

typedef struct svgplot_layout {
    double W, H;         /* document size */
    double L, T, pw, ph; /* plot area */
    svgplot_axis ax, ay;
    int x_int;   /* every x is a whole number: ticks at whole numbers only */
    int markers; /* circles on every point */
    /* legend: `cols` × `rows` items of item_w × SVGPLOT_ROW_H at (lx, ly) */
    int has_legend, legend_right, cols, rows;
    double lx, ly, lw, lh, item_w;
    int panel; /* index in a stack: keeps the clip path's id unique in the document */
} svgplot_layout;

/* Bar charts place category i at x = i. */
static double svgplot_xval(const svgplot *p, size_t i) {
    return p->x && !p->categories ? p->x[i] : (double)i;
}

static int svgplot_valid(const svgplot *p, int s, size_t i) {
    return isfinite(svgplot_xval(p, i)) && isfinite(p->series[s].y[i]);
}

/* Pixel position of data (x, y), clamped far outside the plot so that wild values (a
 * fixed ymax below the data) still give finite coordinates; the clip path hides them. */
static double svgplot_mapx(const svgplot_layout *l, double x) {
    double f = (x - l->ax.lo) / (l->ax.hi - l->ax.lo);
    double v = l->L + SVGPLOT_INSET + f * (l->pw - 2 * SVGPLOT_INSET);
    return fmin(fmax(v, -1e6), 1e6);
}

static double svgplot_mapy(const svgplot_layout *l, double y) {
    double f = (y - l->ay.lo) / (l->ay.hi - l->ay.lo);
    double v = l->T + l->ph - SVGPLOT_INSET - f * (l->ph - 2 * SVGPLOT_INSET);
    return fmin(fmax(v, -1e6), 1e6);
}

/* Widens a single value into a range that shows it in the middle. */
static void svgplot_pad_constant(double *lo, double *hi, int whole) {
    double c = *lo;
    double d = whole ? 1.0 : fabs(c) > 1e-200 ? fabs(c) * 0.5 : 0.5;
    *lo = c - d;
    *hi = c + d;
}

/* Fits both axes and the layout. 0, or an error code with e set. */
static int svgplot_fit(const svgplot *p, svgplot_layout *l, tdm_err *e) {
    /* x range over every finite x: episodes with all values missing still hold a place */
    double xlo = INFINITY, xhi = -INFINITY;
    l->x_int = 1;
    for (size_t i = 0; i < p->n; i++) {
        double x = svgplot_xval(p, i);
        if (!isfinite(x)) continue;
        xlo = fmin(xlo, x);
        xhi = fmax(xhi, x);
        if (!(fabs(x) < 9007199254740992.0 && x == floor(x))) l->x_int = 0;
    }
    if (xlo > xhi) xlo = 0, xhi = 1;
    if (!isfinite(xhi - xlo))
        return err_set(e, ERR_USAGE, "svgplot: x values span too wide a range to plot");
    if (p->categories) /* half a group of room on either side */
        xlo = -0.5, xhi = (double)p->n - 0.5;
    else if (svgplot_degenerate(xlo, xhi))
        svgplot_pad_constant(&xlo, &xhi, l->x_int);

    double ylo, yhi;
    int auto_y = p->ymin == p->ymax; /* NaN bounds are unequal: refused below */
    if (!auto_y) {
        if (!isfinite(p->ymin) || !isfinite(p->ymax) || p->ymin > p->ymax ||
            !isfinite(p->ymax - p->ymin) || svgplot_degenerate(p->ymin, p->ymax))
            return err_set(e, ERR_USAGE,
                           "svgplot: y range [%g, %g] is empty, not finite or too narrow "
                           "(pass ymin == ymax to fit it to the data)",
                           p->ymin, p->ymax);
        ylo = p->ymin;
        yhi = p->ymax;
    } else {
        ylo = INFINITY;
        yhi = -INFINITY;
        for (int s = 0; s < p->nseries; s++)
            for (size_t i = 0; i < p->n; i++)
                if (svgplot_valid(p, s, i)) {
                    ylo = fmin(ylo, p->series[s].y[i]);
                    yhi = fmax(yhi, p->series[s].y[i]);
                }
        if (ylo > yhi) ylo = 0, yhi = 1;
        if (!isfinite(yhi - ylo))
            return err_set(e, ERR_USAGE, "svgplot: y values span too wide a range to plot");
        if (svgplot_degenerate(ylo, yhi)) svgplot_pad_constant(&ylo, &yhi, 0);
    }

    /* legend items: the widest (cut) name decides the column width */
    double name_w = 0;
    for (int s = 0; s < p->nseries; s++) {
        const char *nm = p->series[s].name;
        name_w = fmax(name_w, svgplot_text_w_cut(svgplot_has(nm) ? nm : "series 0000",
                                                 SVGPLOT_NAME_MAX_CP, SVGPLOT_FONT_LEGEND, 1));
    }
    l->item_w = SVGPLOT_SAMPLE_W + 6 + name_w + SVGPLOT_LEG_GAP;
    l->markers = p->n <= SVGPLOT_MARKER_MAX_N && !p->categories;

    /* vertical: title, plot, tick labels, x label */
    l->T = svgplot_has(p->title) ? 50 : 20;
    double below = SVGPLOT_TICK_LEN + 20 + (svgplot_has(p->xlabel) ? 24 : 0) + 10;
    l->ph = l->H - l->T - below - SVGPLOT_EDGE;
    if (l->ph < 40) l->ph = 40;

    /* y ticks depend only on the height; expand an automatic range to whole steps */
    l->ay.lo = ylo;
    l->ay.hi = yhi;
    double ytarget = fmax(2, floor(l->ph / 50));
    double ystep = svgplot_nice((yhi - ylo) / ytarget);
    if (auto_y) {
        l->ay.lo = floor(ylo / ystep + 1e-9) * ystep;
        l->ay.hi = ceil(yhi / ystep - 1e-9) * ystep;
        if (l->ay.hi <= l->ay.lo) l->ay.hi = l->ay.lo + ystep;
    }
    svgplot_set_step(&l->ay, ystep);

    l->L = SVGPLOT_EDGE + (svgplot_has(p->ylabel) ? SVGPLOT_FONT_LABEL + 10 : 0) +
           svgplot_widest_tick(&l->ay) + 6 + SVGPLOT_TICK_LEN;

    /* room right of the plot for half the last x tick label (estimated from the largest
     * x, as the ticks are not chosen yet) */
    char last[48];
    double xmag = fmax(fabs(xlo), fabs(xhi));
    snprintf(last, sizeof last, "%.0f", xmag < 1e9 ? xmag : 1e9);
    double R = fmax(30, svgplot_text_w(last, 0, SVGPLOT_FONT_TICK) / 2 + 10);

    /* legend: right of the plot in as few columns as the height allows, if that leaves
     * the plot most of the width; else wrapped in rows below it, the document taller */
    l->has_legend = p->nseries > 0;
    if (l->has_legend) {
        int ns = p->nseries;
        int fit_rows = (int)((l->ph - 2 * SVGPLOT_LEG_PAD) / SVGPLOT_ROW_H);
        if (fit_rows < 1) fit_rows = 1;
        int cols = (ns + fit_rows - 1) / fit_rows;
        double lw = cols * l->item_w - SVGPLOT_LEG_GAP + 2 * SVGPLOT_LEG_PAD;
        if (lw <= 0.34 * l->W) {
            l->legend_right = 1;
            l->cols = cols;
            l->rows = (ns + cols - 1) / cols;
            l->lw = lw;
            l->lx = l->W - SVGPLOT_EDGE - lw;
            l->ly = l->T;
            R += SVGPLOT_EDGE + lw - 10;
        } else {
            l->legend_right = 0;
            double avail = l->W - 2 * SVGPLOT_EDGE - 2 * SVGPLOT_LEG_PAD + SVGPLOT_LEG_GAP;
            cols = (int)(avail / l->item_w);
            if (cols < 1) cols = 1;
            if (cols > ns) cols = ns;
            l->cols = cols;
            l->rows = (ns + cols - 1) / cols;
            l->lw = cols * l->item_w - SVGPLOT_LEG_GAP + 2 * SVGPLOT_LEG_PAD;
            l->lx = fmax(SVGPLOT_EDGE, (l->W - l->lw) / 2);
            l->ly = l->T + l->ph + below + 4;
        }
        l->lh = l->rows * SVGPLOT_ROW_H + 2 * SVGPLOT_LEG_PAD;
        if (!l->legend_right) l->H = l->ly + l->lh + SVGPLOT_EDGE;
    }
    l->pw = l->W - l->L - R;
    if (l->pw < 40) l->pw = 40;

    /* x ticks: about one per 90 px, whole numbers for episodes, and never so dense that
     * the labels touch (the step grows 1 → 2 → 5 → 10 until they fit) */
    l->ax.lo = xlo;
    l->ax.hi = xhi;
    if (p->categories) { /* a tick per category, whatever its label's width */
        svgplot_set_step(&l->ax, 1);
        l->ax.k0 = 0;
        l->ax.k1 = (long long)p->n - 1;
        return 0;
    }
    double xstep = svgplot_nice((xhi - xlo) / fmax(2, floor(l->pw / 90)));
    if (l->x_int && xstep < 1) xstep = 1;
    for (int tries = 0;; tries++) {
        svgplot_set_step(&l->ax, xstep);
        double px_per_step = xstep / (xhi - xlo) * (l->pw - 2 * SVGPLOT_INSET);
        double need = svgplot_widest_tick(&l->ax) + 14;
        if (px_per_step >= need || tries >= 40) break;
        xstep = svgplot_nice(xstep * 1.5);
    }
    return 0;
}

/* Tick marks, grid lines and tick labels of both axes, then the axis lines. */
static void svgplot_emit_axes(buf_t *b, const svgplot *p, const svgplot_layout *l) {
    double B = l->T + l->ph, Rx = l->L + l->pw;
    double ax0 = svgplot_crisp(l->L), ay0 = svgplot_crisp(B);

    buf_puts(b, "<g class=\"grid\" stroke=\"#e4e4e4\" stroke-width=\"1\">\n");
    for (long long k = l->ax.k0; k <= l->ax.k1; k++) {
        double x = svgplot_crisp(svgplot_mapx(l, svgplot_tick(&l->ax, k)));
        buf_printf(b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", svgplot_px(x).s,
                   svgplot_px(l->T).s, svgplot_px(x).s, svgplot_px(B).s);
    }
    for (long long k = l->ay.k0; k <= l->ay.k1; k++) {
        double y = svgplot_crisp(svgplot_mapy(l, svgplot_tick(&l->ay, k)));
        buf_printf(b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n",
                   svgplot_px(l->L).s, svgplot_px(y).s, svgplot_px(Rx).s, svgplot_px(y).s);
    }
    buf_puts(b, "</g>\n");

    buf_puts(b, "<g class=\"ticks\" stroke=\"#444444\" stroke-width=\"1\">\n");
    for (long long k = l->ax.k0; k <= l->ax.k1; k++) {
        double x = svgplot_crisp(svgplot_mapx(l, svgplot_tick(&l->ax, k)));
        buf_printf(b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n", svgplot_px(x).s,
                   svgplot_px(ay0).s, svgplot_px(x).s,
                   svgplot_px(ay0 + SVGPLOT_TICK_LEN).s);
    }
    for (long long k = l->ay.k0; k <= l->ay.k1; k++) {
        double y = svgplot_crisp(svgplot_mapy(l, svgplot_tick(&l->ay, k)));
        buf_printf(b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"/>\n",
                   svgplot_px(ax0 - SVGPLOT_TICK_LEN).s, svgplot_px(y).s, svgplot_px(ax0).s,
                   svgplot_px(y).s);
    }
    buf_puts(b, "</g>\n");

    buf_printf(b, "<g class=\"tick-labels\" font-size=\"%d\" fill=\"#333333\">\n",
               SVGPLOT_FONT_TICK);
    for (long long k = l->ax.k0; k <= l->ax.k1; k++) {
        double v = svgplot_tick(&l->ax, k);
        if (p->categories) {
            double room = (l->pw - 2 * SVGPLOT_INSET) / (double)p->n - 4;
            const char *name = p->categories[k] ? p->categories[k] : "";
            buf_printf(b, "<text class=\"xtick\" x=\"%s\" y=\"%s\" text-anchor=\"middle\">",
                       svgplot_px(svgplot_mapx(l, v)).s,
                       svgplot_px(B + SVGPLOT_TICK_LEN + 15).s);
            svgplot_text_cut(b, name, svgplot_fit_cp_cut(name, room, SVGPLOT_FONT_TICK, 1), 1);
            buf_puts(b, "</text>\n");
            continue;
        }
        buf_printf(
        b, "<text class=\"xtick\" x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n",
        svgplot_px(svgplot_mapx(l, v)).s, svgplot_px(B + SVGPLOT_TICK_LEN + 15).s,
        svgplot_ticktext(&l->ax, v).s);
    }
    for (long long k = l->ay.k0; k <= l->ay.k1; k++) {
        double v = svgplot_tick(&l->ay, k);
        buf_printf(
        b, "<text class=\"ytick\" x=\"%s\" y=\"%s\" text-anchor=\"end\">%s</text>\n",
        svgplot_px(l->L - SVGPLOT_TICK_LEN - 5).s, svgplot_px(svgplot_mapy(l, v) + 4).s,
        svgplot_ticktext(&l->ay, v).s);
    }
    buf_puts(b, "</g>\n");

    /* left and bottom axis lines, drawn over the grid */
    buf_printf(b,
               "<path class=\"axes\" d=\"M%s %sV%sH%s\" fill=\"none\" stroke=\"#444444\" "
               "stroke-width=\"1\"/>\n",
               svgplot_px(ax0).s, svgplot_px(l->T).s, svgplot_px(ay0).s, svgplot_px(Rx).s);

    if (svgplot_has(p->xlabel)) {
        buf_printf(b,
                   "<text class=\"xlabel\" x=\"%s\" y=\"%s\" text-anchor=\"middle\" "
                   "font-size=\"%d\" fill=\"#222222\">",
                   svgplot_px(l->L + l->pw / 2).s,
                   svgplot_px(B + SVGPLOT_TICK_LEN + 20 + 20).s, SVGPLOT_FONT_LABEL);
        svgplot_text(b, p->xlabel, svgplot_fit_cp(p->xlabel, l->pw, SVGPLOT_FONT_LABEL));
        buf_puts(b, "</text>\n");
    }
    if (svgplot_has(p->ylabel)) {
        svgplot_str x = svgplot_px(SVGPLOT_EDGE + 11), y = svgplot_px(l->T + l->ph / 2);
        buf_printf(b,
                   "<text class=\"ylabel\" x=\"%s\" y=\"%s\" text-anchor=\"middle\" "
                   "font-size=\"%d\" fill=\"#222222\" transform=\"rotate(-90 %s %s)\">",
                   x.s, y.s, SVGPLOT_FONT_LABEL, x.s, y.s);
        svgplot_text(b, p->ylabel, svgplot_fit_cp(p->ylabel, l->ph, SVGPLOT_FONT_LABEL));
        buf_puts(b, "</text>\n");
    }
}

/* Stroke attributes of series s (colour, width, dash pattern). */
static void svgplot_stroke(buf_t *b, int s) {
    const char *dash = svgplot_dashes[(s / SVGPLOT_NCOLOURS) % SVGPLOT_NDASHES];
    buf_printf(b,
               " fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-linejoin=\"round\"",
               svgplot_palette[s % SVGPLOT_NCOLOURS]);
    if (dash)
        buf_printf(b, " stroke-dasharray=\"%s\"", dash);
    else
        buf_puts(b, " stroke-linecap=\"round\"");
}

static void svgplot_marker(buf_t *b, int s, double x, double y) {
    buf_printf(b,
               "<circle cx=\"%s\" cy=\"%s\" r=\"" SVGPLOT_MARKER_R "\" fill=\"%s\" "
               "stroke=\"#ffffff\" stroke-width=\"1\"/>\n",
               svgplot_px(x).s, svgplot_px(y).s, svgplot_palette[s % SVGPLOT_NCOLOURS]);
}

static void svgplot_name(buf_t *b, const svgplot *p, int s, size_t max_cp) {
    const char *nm = p->series[s].name;
    if (svgplot_has(nm))
        svgplot_text_cut(b, nm, max_cp, 1);
    else
        buf_printf(b, "series %d", s + 1);
}

/* One polyline per unbroken run of valid points. Points sharing a pixel column are
 * thinned to the first, lowest, highest and last of them (in order), which draws the
 * same picture as all of them, so long runs do not make huge files. */
static void svgplot_emit_run(buf_t *b, const svgplot *p, const svgplot_layout *l, int s,
                             size_t a, size_t end) {
    const double *y = p->series[s].y;
    buf_puts(b, "<polyline");
    svgplot_stroke(b, s);
    buf_puts(b, " points=\"");
    size_t written = 0;
    size_t i = a;
    while (i < end) {
        double col = floor(svgplot_mapx(l, svgplot_xval(p, i)));
        size_t first = i, last = i, lo = i, hi = i;
        for (i++; i < end && floor(svgplot_mapx(l, svgplot_xval(p, i))) == col; i++) {
            last = i;
            if (y[i] < y[lo]) lo = i;
            if (y[i] > y[hi]) hi = i;
        }
        size_t pick[4] = {first, lo < hi ? lo : hi, lo < hi ? hi : lo, last};
        for (int k = 0; k < 4; k++) {
            if (k > 0 && pick[k] == pick[k - 1]) continue; /* sorted: equal ones adjoin */
            buf_printf(b, "%s%s,%s",
                       written == 0  ? ""
                       : written % 8 ? " "
                                     : "\n",
                       svgplot_px(svgplot_mapx(l, svgplot_xval(p, pick[k]))).s,
                       svgplot_px(svgplot_mapy(l, y[pick[k]])).s);
            written++;
        }
    }
    buf_puts(b, "\"/>\n");
}

/* The bars of series s: in each category a slot of 80 % of the group width, split among
 * the series; a bar rises from the bottom of the plot to its value. */
static void svgplot_emit_bars(buf_t *b, const svgplot *p, const svgplot_layout *l, int s) {
    double group = (l->pw - 2 * SVGPLOT_INSET) / (double)p->n;
    double bw = 0.8 * group / (double)(p->nseries > 0 ? p->nseries : 1);
    double base = l->T + l->ph;
    for (size_t i = 0; i < p->n; i++) {
        double v = p->series[s].y[i];
        if (!isfinite(v)) continue;
        double x = svgplot_mapx(l, (double)i) - 0.4 * group + s * bw;
        double top = fmin(svgplot_mapy(l, v), base);
        buf_printf(b,
                   "<rect class=\"bar\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
                   "fill=\"%s\"><title>",
                   svgplot_px(x).s, svgplot_px(top).s, svgplot_px(fmax(bw - 1, 1)).s,
                   svgplot_px(base - top).s, svgplot_palette[s % SVGPLOT_NCOLOURS]);
        svgplot_name(b, p, s, 0);
        buf_puts(b, ", ");
        svgplot_text(b, p->categories[i] ? p->categories[i] : "", 0);
        svgplot_axis six = {.decimals = -1, .sig = 6}; /* the tick formatter: locale-proof */
        buf_printf(b, ": %s</title></rect>\n", svgplot_ticktext(&six, v).s);
    }
}

static void svgplot_emit_series(buf_t *b, const svgplot *p, const svgplot_layout *l) {
    char clip[32] = "svgplot-clip"; /* panels after the first: svgplot-clip-N */
    if (l->panel) snprintf(clip, sizeof clip, "svgplot-clip-%d", l->panel);
    buf_printf(b,
               "<defs><clipPath id=\"%s\"><rect x=\"%s\" y=\"%s\" "
               "width=\"%s\" height=\"%s\"/></clipPath></defs>\n",
               clip, svgplot_px(l->L).s, svgplot_px(l->T).s, svgplot_px(l->pw).s,
               svgplot_px(l->ph).s);
    buf_printf(b, "<g class=\"data\" clip-path=\"url(#%s)\">\n", clip);
    for (int s = 0; s < p->nseries; s++) {
        buf_printf(b, "<g class=\"series\" id=\"series-%s%d\"><title>",
                   l->panel ? "p" : "", l->panel ? l->panel * 1000 + s + 1 : s + 1);
        svgplot_name(b, p, s, 0);
        buf_puts(b, "</title>\n");
        if (p->categories) {
            svgplot_emit_bars(b, p, l, s);
            buf_puts(b, "</g>\n");
            continue;
        }
        size_t i = 0;
        while (i < p->n) {
            if (!svgplot_valid(p, s, i)) {
                i++;
                continue;
            }
            size_t a = i;
            while (i < p->n && svgplot_valid(p, s, i)) i++;
            if (i - a >= 2)
                svgplot_emit_run(b, p, l, s, a, i);
            else if (!l->markers) /* a lone point has no line: mark it */
                svgplot_marker(b, s, svgplot_mapx(l, svgplot_xval(p, a)),
                               svgplot_mapy(l, p->series[s].y[a]));
        }
        if (l->markers)
            for (size_t k = 0; k < p->n; k++)
                if (svgplot_valid(p, s, k))
                    svgplot_marker(b, s, svgplot_mapx(l, svgplot_xval(p, k)),
                                   svgplot_mapy(l, p->series[s].y[k]));
        buf_puts(b, "</g>\n");
    }
    buf_puts(b, "</g>\n");
}

static void svgplot_emit_legend(buf_t *b, const svgplot *p, const svgplot_layout *l) {
    buf_printf(b, "<g class=\"legend\" font-size=\"%d\" fill=\"#222222\">\n",
               SVGPLOT_FONT_LEGEND);
    buf_printf(b,
               "<rect class=\"legend-box\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
               "fill=\"#ffffff\" stroke=\"#cccccc\" stroke-width=\"1\" rx=\"3\"/>\n",
               svgplot_px(svgplot_crisp(l->lx)).s, svgplot_px(svgplot_crisp(l->ly)).s,
               svgplot_px(floor(l->lw)).s, svgplot_px(floor(l->lh)).s);
    for (int s = 0; s < p->nseries; s++) {
        /* columns read top to bottom at the right; rows left to right when wrapped below */
        int col = l->legend_right ? s / l->rows : s % l->cols;
        int row = l->legend_right ? s % l->rows : s / l->cols;
        double x = l->lx + SVGPLOT_LEG_PAD + col * l->item_w;
        double y = l->ly + SVGPLOT_LEG_PAD + row * SVGPLOT_ROW_H + SVGPLOT_ROW_H / 2;
        buf_puts(b, "<g class=\"legend-item\"><title>");
        svgplot_name(b, p, s, 0);
        buf_puts(b, "</title>");
        buf_printf(b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\"", svgplot_px(x).s,
                   svgplot_px(y).s, svgplot_px(x + SVGPLOT_SAMPLE_W).s, svgplot_px(y).s);
        svgplot_stroke(b, s);
        buf_puts(b, "/>");
        if (l->markers) svgplot_marker(b, s, x + SVGPLOT_SAMPLE_W / 2, y);
        buf_printf(b, "<text x=\"%s\" y=\"%s\">", svgplot_px(x + SVGPLOT_SAMPLE_W + 6).s,
                   svgplot_px(y + 4).s);
        svgplot_name(b, p, s, SVGPLOT_NAME_MAX_CP);
        buf_puts(b, "</text></g>\n");
    }
    buf_puts(b, "</g>\n");
}

static void svgplot_emit_head(buf_t *b, const char *title, double W, double H) {
    svgplot_str w = svgplot_px(ceil(W)), h = svgplot_px(ceil(H));
    buf_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    buf_printf(b,
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%s\" "
               "height=\"%s\" viewBox=\"0 0 %s %s\" font-family=\"" SVGPLOT_FONTS "\">\n",
               w.s, h.s, w.s, h.s);
    buf_puts(b, "<title>"); /* the browser's tab name */
    svgplot_text(b, svgplot_has(title) ? title : "plot", 0);
    buf_puts(b, "</title>\n");
    buf_printf(b,
               "<rect class=\"background\" x=\"0\" y=\"0\" width=\"%s\" height=\"%s\" "
               "fill=\"#ffffff\"/>\n",
               w.s, h.s);
}

/* The title centred on cx where it fits, else moved (and if need be cut) to stay
 * inside the document of width W. */
static void svgplot_emit_title(buf_t *b, const svgplot *p, double cx, double W) {
    if (!svgplot_has(p->title)) return;
    double avail = W - 2 * SVGPLOT_EDGE;
    size_t cut = svgplot_fit_cp(p->title, avail, SVGPLOT_FONT_TITLE);
    double half = svgplot_text_w(p->title, cut, SVGPLOT_FONT_TITLE) * 1.05 / 2; /* bold */
    cx = fmin(fmax(cx, SVGPLOT_EDGE + half), W - SVGPLOT_EDGE - half);
    buf_printf(b,
               "<text class=\"title\" x=\"%s\" y=\"31\" text-anchor=\"middle\" "
               "font-size=\"%d\" font-weight=\"bold\" fill=\"#111111\">",
               svgplot_px(cx).s, SVGPLOT_FONT_TITLE);
    svgplot_text(b, p->title, cut);
    buf_puts(b, "</text>\n");
}

/* n == 0: the frame of a plot with the message in its middle (no document head). */
static void svgplot_emit_empty(buf_t *b, const svgplot *p, double W, double H) {
    double T = svgplot_has(p->title) ? 50 : 20;
    svgplot_emit_title(b, p, W / 2, W);
    buf_printf(b,
               "<rect class=\"plot-area\" x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" "
               "fill=\"#fafafa\" stroke=\"#cccccc\" stroke-width=\"1\" "
               "stroke-dasharray=\"6 4\"/>\n",
               svgplot_px(svgplot_crisp(SVGPLOT_EDGE + 40)).s,
               svgplot_px(svgplot_crisp(T)).s,
               svgplot_px(floor(W - 2 * SVGPLOT_EDGE - 80)).s,
               svgplot_px(floor(H - T - SVGPLOT_EDGE - 30)).s);
    buf_printf(b,
               "<text class=\"empty\" x=\"%s\" y=\"%s\" text-anchor=\"middle\" "
               "font-size=\"20\" fill=\"#666666\">",
               svgplot_px(W / 2).s, svgplot_px(T + (H - T - SVGPLOT_EDGE - 30) / 2 + 7).s);
    svgplot_text(b, p->empty_text ? p->empty_text : "no episodes yet", 0);
    buf_puts(b, "</text>\n");
}

/* Checks the plot and lays it out as panel `panel` of a document: 0, or an error code
 * with e set. */
static int svgplot_prepare(const svgplot *p, int panel, svgplot_layout *l, tdm_err *e) {
    if (!p) return err_set(e, ERR_INTERNAL, "svgplot: no plot given");
    if (p->nseries < 0 || (p->nseries > 0 && !p->series))
        return err_set(e, ERR_INTERNAL, "svgplot: %d series but no series array", p->nseries);
    if (p->n > 0)
        for (int s = 0; s < p->nseries; s++)
            if (!p->series[s].y) return err_set(e, ERR_INTERNAL, "svgplot: series %d has no values", s + 1);
    memset(l, 0, sizeof *l);
    l->panel = panel;
    l->W = p->width ? p->width : SVGPLOT_DEFAULT_WIDTH;
    l->H = p->height ? p->height : SVGPLOT_DEFAULT_HEIGHT;
    if (l->W < 200 || l->H < 150 || l->W > 20000 || l->H > 20000)
        return err_set(e, ERR_USAGE, "svgplot: size %dx%d is outside 200x150 .. 20000x20000",
                       p->width, p->height);
    return p->n > 0 ? svgplot_fit(p, l, e) : 0;
}

/* Everything of a prepared plot after the document head. */
static void svgplot_emit_plot(buf_t *b, const svgplot *p, const svgplot_layout *l) {
    if (p->n == 0) {
        svgplot_emit_empty(b, p, l->W, l->H);
        return;
    }
    buf_printf(b,
               "<rect class=\"plot-area\" x=\"%s\" y=\"%s\" width=\"%s\" "
               "height=\"%s\" fill=\"#ffffff\"/>\n",
               svgplot_px(l->L).s, svgplot_px(l->T).s, svgplot_px(l->pw).s,
               svgplot_px(l->ph).s);
    svgplot_emit_title(b, p, l->L + l->pw / 2, l->W);
    svgplot_emit_axes(b, p, l);
    svgplot_emit_series(b, p, l);
    if (l->has_legend) svgplot_emit_legend(b, p, l);
}

/* The finished buffer as the caller's string, or NULL with e set when it ran out of
 * memory on the way. */
static char *svgplot_finish(buf_t *b, size_t *len, tdm_err *e) {
    if (b->oom) {
        free(b->p);
        err_set(e, ERR_INTERNAL, "svgplot: out of memory building the document");
        return NULL;
    }
    if (len) *len = b->n;
    return b->p;
}

char *svgplot_render(const svgplot *p, size_t *len, tdm_err *e) {
    svgplot_layout l;
    if (svgplot_prepare(p, 0, &l, e)) return NULL;
    buf_t b = {0};
    svgplot_emit_head(&b, p->title, l.W, l.H);
    svgplot_emit_plot(&b, p, &l);
    buf_puts(&b, "</svg>\n");
    return svgplot_finish(&b, len, e);
}

char *svgplot_render_stack(const svgplot *panels, int n, const char *title, size_t *len,
                           tdm_err *e) {
    if (n < 1 || !panels) {
        err_set(e, ERR_INTERNAL, "svgplot: a stack needs at least one panel");
        return NULL;
    }
    svgplot_layout *l = calloc((size_t)n, sizeof *l);
    if (!l) {
        err_set(e, ERR_INTERNAL, "svgplot: out of memory");
        return NULL;
    }
    double W = 0, H = 0;
    for (int i = 0; i < n; i++) {
        if (svgplot_prepare(&panels[i], i, &l[i], e)) {
            free(l);
            return NULL;
        }
        W = fmax(W, l[i].W);
        H += l[i].H;
    }
    buf_t b = {0};
    svgplot_emit_head(&b, title, W, H);
    double y = 0;
    for (int i = 0; i < n; i++) {
        buf_printf(&b, "<g class=\"panel\" transform=\"translate(0 %s)\">\n",
                   svgplot_px(y).s);
        svgplot_emit_plot(&b, &panels[i], &l[i]);
        buf_puts(&b, "</g>\n");
        y += l[i].H;
    }
    buf_puts(&b, "</svg>\n");
    free(l);
    return svgplot_finish(&b, len, e);
}

int svgplot_write(const svgplot *p, FILE *out, tdm_err *e) {
    if (!out) return err_set(e, ERR_INTERNAL, "svgplot: no output stream");
    size_t n;
    tdm_err dropped; /* e may be NULL, yet the code must come back */
    if (!e) e = &dropped;
    char *doc = svgplot_render(p, &n, e);
    if (!doc) return e->code;
    errno = 0;
    int bad = fwrite(doc, 1, n, out) != n;
    bad |= fflush(out) != 0;
    bad |= ferror(out);
    int why = errno ? errno : EIO;
    free(doc);
    if (bad) return err_sys(e, ERR_USAGE, why, "writing the SVG failed"); /* the caller names the file */
    return 0;
}
