/* plot — small line plots (PNG and SVG) with cairo: title, axes with "nice"
 * ticks (Heckbert's nice numbers), tick and axis labels, a legend, and
 * several series drawn as lines with markers. A single point still gets a
 * sensible picture: degenerate ranges are padded and the point drawn with
 * its marker. Text uses "DejaVu Sans" (fonts-dejavu-core).
 *
 *   plot_t *p = plot_new("Loss", "epoch", "cross-entropy");
 *   plot_add_series(p, "train", xs, ys, n);
 *   plot_write_png(p, "loss.png", 800, 500, why, sizeof why);
 */
#ifndef DDP_PLOT_H
#define DDP_PLOT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct plot plot_t;

/* NULL when out of memory. Strings are copied. */
plot_t *plot_new(const char *title, const char *xlabel, const char *ylabel);
void plot_destroy(plot_t **self_p);

/* Copies n points; non-finite values are skipped (they break the line).
 * At most PLOT_MAX_SERIES series. 0 or -1. */
#define PLOT_MAX_SERIES 8
int plot_add_series(plot_t *self, const char *name, const double *x, const double *y, size_t n);
/* x is a count (epochs): ticks only on whole numbers. */
void plot_set_integer_x(plot_t *self, bool on);
/* Keep 0 inside the y range (throughput, accuracy) when the data are >= 0. */
void plot_set_y_from_zero(plot_t *self, bool on);

/* Write atomically (temporary file + rename). Sizes in pixels (PNG) or
 * points (SVG). 0, or -1 with a reason. */
int plot_write_png(const plot_t *self, const char *path, int width, int height, char *err,
                   size_t errlen);
int plot_write_svg(const plot_t *self, const char *path, double width, double height,
                   char *err, size_t errlen);

/* Free cairo's and fontconfig's process-wide caches (font faces); call
 * once at exit, after the last plot, so leak checkers see a clean exit. */
void plot_shutdown(void);

/* Nice tick step for [lo, hi] with about `target` ticks (1, 2 or 5 x 10^k),
 * and the decimals its labels need. Exposed for tests. */
double plot_nice_step(double lo, double hi, int target, int *decimals);

#endif
