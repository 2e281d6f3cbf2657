#include "reporterd/canvas.h"

#include "common/atomic_file.h"
#include "common/errbuf.h"

#include <cairo-svg.h>
#include <stdio.h>

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

/* cairo's write callback: into the atomic file's stream */
static cairo_status_t s_write(void *closure, const unsigned char *data, unsigned int length)
{
    return fwrite(data, 1, length, closure) == length ? CAIRO_STATUS_SUCCESS
                                                      : CAIRO_STATUS_WRITE_ERROR;
}

int canvas_write(canvas_draw_fn draw, const void *ctx, const char *path, bool svg, double w,
                 double h, const char *what, char *err, size_t errlen)
{
    atomic_file_t *file = atomic_file_new(path, err, errlen);
    if (!file)
        return -1;
    FILE *out = atomic_file_stream(file);
    cairo_surface_t *surface =
        svg ? cairo_svg_surface_create_for_stream(s_write, out, w, h)
            : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)w, (int)h);
    cairo_t *cr = cairo_create(surface);
    int rc = draw(ctx, cr, w, h);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (svg)
        cairo_surface_finish(surface); /* writes the file */
    else if (rc == 0 && st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_write_to_png_stream(surface, s_write, out);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (rc != 0 || st != CAIRO_STATUS_SUCCESS) {
        err_set(err, errlen, "%s %s: %s", what, path, cairo_status_to_string(st));
        atomic_file_destroy(&file);
        return -1;
    }
    return atomic_file_commit(&file, err, errlen);
}
