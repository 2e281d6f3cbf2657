/* webpage — the dashboard (reporterd/web/index.html: HTML, CSS and JS with
 * inline SVG charts, no CDN), compiled into the binary by
 * cmake/embed.cmake and served at / by metrics_http. */
#ifndef DDP_WEBPAGE_H
#define DDP_WEBPAGE_H

extern const unsigned char web_index_html[];
extern const unsigned long web_index_html_len;

#endif
