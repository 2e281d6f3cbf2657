/* canvas — what plot.c and chart.c share on top of cairo: the font, anchored
 * text, and rendering a figure to a PNG or SVG file atomically. */
#ifndef DDP_CANVAS_H
#define DDP_CANVAS_H

#include <cairo.h>
#include <stdbool.h>
#include <stddef.h>

#define CANVAS_FONT "DejaVu Sans"

void canvas_font(cairo_t *cr, double size, bool bold);
/* Draw text with its anchor: ax, ay in {0, 0.5, 1} of its box. */
void canvas_text(cairo_t *cr, const char *s, double x, double y, double ax, double ay);
double canvas_text_width(cairo_t *cr, const char *s);

/* Draws a figure on a canvas of w x h units; 0, or -1 when it failed. */
typedef int (*canvas_draw_fn)(const void *ctx, cairo_t *cr, double w, double h);

/* Renders draw() to a PNG of w x h pixels or an SVG of w x h points, through
 * a temporary file renamed into place. `what` names the figure in errors
 * ("plot", "chart"). 0, or -1 with a reason. */
int canvas_write(canvas_draw_fn draw, const void *ctx, const char *path, bool svg, double w,
                 double h, const char *what, char *err, size_t errlen);
#endif
