/* svgplot.h — line plots and grouped bar charts as standalone SVG documents (`tandem alpha
 * STORE --plot F.svg`, `tandem compare --svg F.svg`).
 *
 * One call turns series y_k(x) into an SVG 1.1 file that a person opens in a browser:
 * a white background, axes with ticks at round steps (1, 2 or 5 × 10^k; whole numbers
 * when every x is a whole number, as episode numbers are), a light grid, axis labels, a
 * title, one polyline per series in a colour-blind-friendly palette (dash patterns once
 * the colours repeat) and a legend naming every series.
 *
 * Contract of the output:
 *   - a well-formed XML document declared encoding="UTF-8" with the SVG namespace, width,
 *     height and a matching viewBox; text (title, labels, names) is XML-escaped and any
 *     invalid UTF-8 or control character in it is replaced by U+FFFD, so the file always
 *     parses;
 *   - numbers use '.' whatever the C locale (they never go through the locale's decimal
 *     point), and the bytes depend only on the input, so equal inputs give equal files;
 *   - a point whose x or y is NaN or ±Inf is not drawn and breaks its series' line there;
 *     a point with no drawn neighbour gets a marker so it stays visible, and when
 *     n <= SVGPLOT_MARKER_MAX_N every point gets one;
 *   - n == 0 gives a document that says `empty_text` ("no episodes yet" by default);
 *   - text that would not fit is cut with "…": legend names after 28 characters, the
 *     title and axis labels at the picture's edge; the whole title stays in the
 *     document's <title> (the browser tab) and each whole name in a <title> tooltip;
 *   - the legend sits right of the plot when it fits there in a few columns, otherwise
 *     it wraps below the plot and the document grows taller (never narrower plots).
 *
 * The elements carry classes a test (tests/svg/render.py) relies on: rect.plot-area,
 * rect.legend-box, g.series (one per series, holding its polylines and markers),
 * g.legend-item, text.xtick / text.ytick (tick labels).
 */
#ifndef TANDEM_REPORT_SVGPLOT_H
#define TANDEM_REPORT_SVGPLOT_H

#include <stddef.h>
#include <stdio.h>

#include "util/err.h"

#define SVGPLOT_DEFAULT_WIDTH 900
#define SVGPLOT_DEFAULT_HEIGHT 500
/* Up to this many points per series every point is drawn as a small circle as well. */
#define SVGPLOT_MARKER_MAX_N 40

typedef struct svgplot_series {
    const char *name; /* legend text, UTF-8; NULL or "": "series K" (K from 1) */
    const double *y;  /* y[0..n) of the plot; required when n > 0 */
} svgplot_series;

typedef struct svgplot {
    const char *title, *xlabel, *ylabel; /* UTF-8; NULL or "": not drawn */
    const double *x;                     /* x[0..n); NULL: x[i] = i */
    size_t n;                            /* points per series */
    const svgplot_series *series;
    int nseries;            /* >= 0; 0 draws the axes alone */
    double ymin, ymax;      /* the y axis range; ymin == ymax: fitted to the data */
    int width, height;      /* pixels (0: SVGPLOT_DEFAULT_*); the height may grow for a
                             * legend that wraps below the plot */
    const char *empty_text; /* shown when n == 0; NULL: "no episodes yet" */
    /* A bar chart instead of lines: n categories named categories[0..n) along x (x is
     * ignored), one bar per series in each, side by side in series order, rising from the
     * bottom of the y range; a NaN or ±Inf value draws no bar. The category names are
     * tick labels (text.xtick), cut with "…" to the room of their group. */
    const char *const *categories;
} svgplot;

/* Renders the plot as an SVG document: a malloc'd, NUL-terminated string the caller
 * frees, its length in *len when len is non-NULL. NULL on error with e set: ERR_USAGE for
 * a bad range or size (ymin > ymax, non-finite bounds, values too far apart to scale,
 * width < 200 or height < 150 or either > 20000), ERR_INTERNAL for missing arrays or
 * out of memory. */
char *svgplot_render(const svgplot *p, size_t *len, tdm_err *e);

/* svgplot_render written to `out` (not closed; flushed). 0, or the error code with e set;
 * a failed write is ERR_INTERNAL with the system's reason. */
int svgplot_write(const svgplot *p, FILE *out, tdm_err *e);

/* Several plots stacked top to bottom in one document (each as svgplot_render would draw
 * it, in a g.panel), as wide as the widest; `title` names the document (its <title>).
 * The same contract and errors as svgplot_render, for every panel. */
char *svgplot_render_stack(const svgplot *panels, int n, const char *title, size_t *len,
                           tdm_err *e);

#endif
