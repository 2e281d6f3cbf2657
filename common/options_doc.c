#include "common/options_doc.h"

#include "common/version.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

static bool is_option(const option_t *opt)
{
    return opt->type != OPTION_TYPE_SECTION && opt->type != OPTION_TYPE_END;
}

int options_choices(const option_t *opt, char *buf, size_t cap)
{
    const char *m = opt->metavar;
    buf[0] = '\0';
    if (!m || !*m || cap < 2)
        return 0;
    for (const char *p = m; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' ||
              *p == '|'))
            return 0;   /* "N", "ARCH", "H:P": a placeholder, not a list */
    size_t i = 0;
    for (const char *p = m; *p && i + 1 < cap; p++)
        buf[i++] = *p == '|' ? ' ' : *p;
    buf[i] = '\0';
    return 1;
}

static bool names_a_path(const option_t *opt)
{
    static const char *const paths[] = {"PATH", "FILE", "DIR", "PREFIX", NULL};
    for (const char *const *p = paths; opt->metavar && *p; p++)
        if (strcmp(opt->metavar, *p) == 0)
            return true;
    return false;
}

/* ---- roff -------------------------------------------------------------------- */

void options_roff_text(FILE *f, const char *text)
{
    bool line_start = true;
    for (const char *p = text; *p; p++) {
        if (line_start && (*p == '.' || *p == '\''))
            fputs("\\&", f);
        if (*p == '\\')
            fputs("\\e", f);
        else if (*p == '-')
            fputs("\\-", f);
        else
            fputc(*p, f);
        line_start = *p == '\n';
    }
}

/* A section heading without its colon, upper case first ("model input"). */
static void roff_heading(FILE *f, const char *heading)
{
    char h[256];
    snprintf(h, sizeof h, "%s", heading);
    size_t n = strlen(h);
    while (n && (h[n - 1] == ':' || h[n - 1] == ' '))
        h[--n] = '\0';
    fputs(".SS \"", f);
    options_roff_text(f, h);
    fputs("\"\n", f);
}

static void roff_row(FILE *f, const option_t *opt)
{
    fputs(".TP\n\\fB\\-\\-", f);
    options_roff_text(f, opt->name);
    fputs("\\fR", f);
    if (opt->metavar) {
        fputs(" \\fI", f);
        options_roff_text(f, opt->metavar);
        fputs("\\fR", f);
    }
    fputc('\n', f);
    if (opt->help && *opt->help)
        options_roff_text(f, opt->help);
    char def[256], choices[256];
    options_default_text(opt, def, sizeof def);
    bool listed = options_choices(opt, choices, sizeof choices) && strchr(opt->metavar, '|');
    if (listed) {
        fputs(opt->help && *opt->help ? "; one of: " : "One of: ", f);
        for (const char *p = choices; *p; p++) {
            if (*p == ' ')
                fputs(", ", f);
            else
                fputc(*p, f);
        }
    }
    if (def[0]) {
        fputs(" (default ", f);
        options_roff_text(f, def);
        fputc(')', f);
    }
    if (opt->type == OPTION_TYPE_STRINGS)
        fputs(". May be given more than once", f);
    fputc('\n', f);
}

static void roff_paragraphs(FILE *f, const char *text)
{
    const char *p = text;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char para[4096];
        snprintf(para, sizeof para, "%.*s", (int)n, p);
        fputs(".PP\n", f);
        options_roff_text(f, para);
        fputc('\n', f);
        p += n;
        while (*p == '\n')
            p++;
    }
}

static void upper(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc(toupper((unsigned char)*s), f);
}

void options_man(const option_table_t *table, const options_page_t *page, FILE *f)
{
    /* no date: the same tree gives the same page (reproducible builds) */
    fputs(".TH \"", f);
    upper(f, page->name);
    fprintf(f, "\" \"%s\" \"\" \"ddpipe %s\" \"ddpipe manual\"\n", page->section,
            version_string());
    fputs(".SH NAME\n", f);
    options_roff_text(f, page->name);
    fputs(" \\- ", f);
    options_roff_text(f, page->summary);
    fputs("\n.SH SYNOPSIS\n", f);
    const char *syn = table ? table->synopsis : page->synopsis ? page->synopsis : "";
    /* a synopsis may hold several lines ("usage: gpud A\n       gpud B") */
    for (const char *p = syn; p;) {
        const char *nl = strchr(p, '\n');
        char line[1024];
        snprintf(line, sizeof line, "%.*s", nl ? (int)(nl - p) : (int)strlen(p), p);
        char *s = line;
        while (*s == ' ')
            s++;
        /* later lines repeat the program's name: drop it, we print it */
        size_t cl = strlen(page->command);
        if (p != syn && strncmp(s, page->command, cl) == 0)
            s += cl;
        while (*s == ' ')
            s++;
        fputs(".B ", f);
        options_roff_text(f, page->command);
        fputc('\n', f);
        if (*s) {
            options_roff_text(f, s);
            fputc('\n', f);
        }
        p = nl ? nl + 1 : NULL;
        if (p)
            fputs(".br\n", f);
    }
    if (page->description) {
        fputs(".SH DESCRIPTION\n", f);
        roff_paragraphs(f, page->description);
    }
    if (table) {
        fputs(".SH OPTIONS\n", f);
        for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
            if (opt->type == OPTION_TYPE_SECTION)
                roff_heading(f, opt->name);
            else
                roff_row(f, opt);
        }
        fputs(".TP\n\\fB\\-\\-help\\fR\nprint the usage and exit\n"
              ".TP\n\\fB\\-\\-version\\fR\nprint the version and exit\n", f);
    }
    if (page->see_also) {
        fputs(".SH SEE ALSO\n", f);
        options_roff_text(f, page->see_also);
        fputc('\n', f);
    }
}

/* ---- bash -------------------------------------------------------------------- */

void options_bash_flags(const option_table_t *table, FILE *f)
{
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++)
        if (is_option(opt))
            fprintf(f, "--%s ", opt->name);
    fputs("--help --version", f);
}

void options_bash_value_arms(const option_table_t *table, FILE *f, const char *indent)
{
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        if (!is_option(opt) || opt->type == OPTION_TYPE_FLAG)
            continue;
        char choices[256];
        if (options_choices(opt, choices, sizeof choices))
            fprintf(f, "%s--%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return;;\n", indent,
                    opt->name, choices);
        else if (names_a_path(opt))
            fprintf(f, "%s--%s) _ddpipe_files; return;;\n", indent, opt->name);
        else   /* a number, an endpoint: nothing to offer, but no flag either */
            fprintf(f, "%s--%s) return;;\n", indent, opt->name);
    }
}
