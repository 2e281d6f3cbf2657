#include "reporterd/canvas.h"

#include "reporterd/afile.h"

#include <cairo-svg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void canvas_font(cairo_t *cr, double size, bool bold)
{
    cairo_select_font_face(cr, CANVAS_FONT, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

void canvas_text(cairo_t *cr, const char *s, double x, double y, double ax, double ay)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.x_bearing - e.width * ax, y - e.y_bearing - e.height * ay);
    cairo_show_text(cr, s);
}

double canvas_text_width(cairo_t *cr, const char *s)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

int canvas_write(canvas_draw_fn draw, const void *ctx, const char *path, bool svg, double w,
                 double h, const char *what, char *why, size_t whylen)
{
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    if (!tmp) {
        snprintf(why, whylen, "%s %s: out of memory", what, path);
        return -1;
    }
    snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
    cairo_surface_t *surface = svg ? cairo_svg_surface_create(tmp, w, h)
                                   : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)w, (int)h);
    cairo_t *cr = cairo_create(surface);
    int rc = draw(ctx, cr, w, h);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (svg)
        cairo_surface_finish(surface); /* writes the file */
    else if (rc == 0 && st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_write_to_png(surface, tmp);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (rc != 0 || st != CAIRO_STATUS_SUCCESS) {
        snprintf(why, whylen, "%s %s: %s", what, path, cairo_status_to_string(st));
        unlink(tmp);
        rc = -1;
    } else {
        rc = afile_publish(tmp, path, why, whylen);
    }
    free(tmp);
    return rc;
}
