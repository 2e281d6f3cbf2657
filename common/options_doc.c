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

/* The arguments of the synopsis line of syn that starts at p (a
 * synopsis may hold several: "usage: gpud A\n       gpud B"), copied into
 * line: its leading blanks dropped, and on a later line the command it
 * repeats, which the page prints itself. */
static const char *synopsis_args(const char *syn, const char *p, const char *command,
                                 char *line, size_t cap)
{
    const char *nl = strchr(p, '\n');
    snprintf(line, cap, "%.*s", nl ? (int)(nl - p) : (int)strlen(p), p);
    const char *s = line;
    while (*s == ' ')
        s++;
    size_t cl = strlen(command);
    if (p != syn && strncmp(s, command, cl) == 0)
        s += cl;
    while (*s == ' ')
        s++;
    return s;
}

/* A table's section heading into h without its trailing colon ("model input:"). */
static void heading_text(char *h, size_t cap, const char *heading)
{
    snprintf(h, cap, "%s", heading);
    size_t n = strlen(h);
    while (n && (h[n - 1] == ':' || h[n - 1] == ' '))
        h[--n] = '\0';
}

/* A section heading without its colon ("model input"). */
static void roff_heading(FILE *f, const char *heading)
{
    char h[256];
    heading_text(h, sizeof h, heading);
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
        fputs(opt->bare ? " [\\fI" : " \\fI", f);
        options_roff_text(f, opt->metavar);
        fputs(opt->bare ? "\\fR]" : "\\fR", f);
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
    if (opt->bare) {
        fputs("; \\fB\\-\\-", f);
        options_roff_text(f, opt->name);
        fputs("\\fR alone means ", f);
        options_roff_text(f, opt->bare);
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
    for (const char *p = syn; p;) {
        char line[1024];
        const char *s = synopsis_args(syn, p, page->command, line, sizeof line);
        fputs(".B ", f);
        options_roff_text(f, page->command);
        fputc('\n', f);
        if (*s) {
            options_roff_text(f, s);
            fputc('\n', f);
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
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
        if (opt->bare && options_choices(opt, choices, sizeof choices))
            /* a value may follow, or another flag: complete that as a flag */
            fprintf(f, "%s--%s) [[ $cur == -* ]] || { COMPREPLY=($(compgen -W '%s' -- \"$cur\")); "
                       "return; };;\n", indent, opt->name, choices);
        else if (options_choices(opt, choices, sizeof choices))
            fprintf(f, "%s--%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return;;\n", indent,
                    opt->name, choices);
        else if (names_a_path(opt))
            fprintf(f, "%s--%s) _ddpipe_files; return;;\n", indent, opt->name);
        else   /* a number, an endpoint: nothing to offer, but no flag either */
            fprintf(f, "%s--%s) return;;\n", indent, opt->name);
    }
}

/* ---- Markdown ------------------------------------------------------------------ */

/* Lines of the Markdown source end before this column, as the usage does. */
#define MD_WIDTH 90

/* One paragraph or list item of Markdown source, built before it is wrapped. */
typedef struct {
    char text[8192];
    size_t n;
} md_buf_t;

static void md_raw(md_buf_t *b, const char *s)
{
    for (; *s && b->n + 1 < sizeof b->text; s++)
        b->text[b->n++] = *s;
    b->text[b->n] = '\0';
}

static bool is_word_char(char c) { return isalnum((unsigned char)c) != 0; }

/* Text with what Markdown would take as markup escaped: emphasis, code,
 * links, HTML; an underscore inside a word (state_dict) is left as it is. */
static void md_text(md_buf_t *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        bool inside = *p == '_' && p > s && is_word_char(p[-1]) && is_word_char(p[1]);
        if (strchr("\\*`<[_", *p) && !inside)
            md_raw(b, "\\");
        char c[2] = {*p, '\0'};
        md_raw(b, c);
    }
}

/* `s` as a code span (no backtick is in a flag, metavar or default). */
static void md_code(md_buf_t *b, const char *s)
{
    md_raw(b, "`");
    md_raw(b, s);
    md_raw(b, "`");
}

/* Whether a wrapped line may start with word: not one Markdown would read as
 * a list item, heading, quote, table or rule inside the item ("-", "#", "1."). */
static bool may_start_line(const char *word, size_t n)
{
    if (strchr("#>+=|", word[0]))
        return false;
    if (n == 1 && (word[0] == '-' || word[0] == '*'))
        return false;
    size_t digits = 0;
    while (digits < n && isdigit((unsigned char)word[digits]))
        digits++;
    if (digits && digits + 1 == n && (word[digits] == '.' || word[digits] == ')'))
        return false;
    return strspn(word, "-") < n;   /* "--" alone: a rule */
}

/* The length of the word after the one of length n at p (0: none), and
 * where it starts. */
static size_t next_word(const char *p, size_t n, const char **next)
{
    p += n;
    while (*p == ' ')
        p++;
    *next = p;
    return strcspn(p, " ");
}

/* b's text wrapped at MD_WIDTH: the first line after `first`, the others
 * after `indent`. A word that may not start a line goes to the next line
 * with the word before it. */
static void md_wrapped(FILE *f, const md_buf_t *b, const char *first, const char *indent)
{
    int at = fprintf(f, "%s", first), column = (int)strlen(indent);
    bool line_empty = true;
    const char *p = b->text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t word = strcspn(p, " ");
        if (!word)
            break;
        const char *after;
        size_t follow = next_word(p, word, &after);
        bool full = at + 1 + (int)word > MD_WIDTH ||
                    (follow && !may_start_line(after, follow) &&
                     at + 1 + (int)word + 1 + (int)follow > MD_WIDTH);
        if (!line_empty && full && may_start_line(p, word)) {
            fprintf(f, "\n%s", indent);
            at = column;
        } else if (!line_empty) {
            fputc(' ', f);
            at++;
        }
        fprintf(f, "%.*s", (int)word, p);
        at += (int)word;
        line_empty = false;
        p += word;
    }
    fputc('\n', f);
}

/* "run:" as "### Run". */
static void md_heading(FILE *f, const char *heading)
{
    char h[256];
    heading_text(h, sizeof h, heading);
    h[0] = (char)toupper((unsigned char)h[0]);
    md_buf_t b = {.n = 0};
    md_text(&b, h);
    fprintf(f, "\n### %s\n\n", b.text);
}

static void md_row(FILE *f, const option_t *opt)
{
    md_buf_t b = {.n = 0};
    char flag[512], def[256];
    if (!opt->metavar)
        snprintf(flag, sizeof flag, "--%s", opt->name);
    else
        snprintf(flag, sizeof flag, opt->bare ? "--%s [%s]" : "--%s %s", opt->name,
                 opt->metavar);
    md_code(&b, flag);
    const char *help = opt->help ? opt->help : "";
    if (*help) {
        md_raw(&b, ": ");
        md_text(&b, help);
    }
    const char *stop = *help && help[strlen(help) - 1] != '.' ? "." : "";
    options_default_text(opt, def, sizeof def);
    if (def[0]) {
        md_raw(&b, stop);
        md_raw(&b, " Default: ");
        md_code(&b, def);
        stop = ".";
    }
    if (opt->bare) {
        snprintf(flag, sizeof flag, "--%s", opt->name);
        md_raw(&b, stop);
        md_raw(&b, " ");
        md_code(&b, flag);
        md_raw(&b, " alone means ");
        md_code(&b, opt->bare);
        stop = ".";
    }
    if (opt->type == OPTION_TYPE_STRINGS) {
        md_raw(&b, stop);
        md_raw(&b, " May be given more than once");
        stop = ".";
    }
    md_raw(&b, stop);
    md_wrapped(f, &b, "- ", "  ");
}

/* The synopsis, one command line per line (a later line may repeat the
 * command: dropped, as the man page does). */
static void md_synopsis(FILE *f, const char *command, const char *syn)
{
    fputs("```\n", f);
    for (const char *p = syn; p;) {
        char line[1024];
        const char *s = synopsis_args(syn, p, command, line, sizeof line);
        fprintf(f, "%s%s%s\n", command, *s ? " " : "", s);
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    fputs("```\n", f);
}

void options_markdown(const option_table_t *table, const options_page_t *page, FILE *f)
{
    fprintf(f, "\n## %s\n\n", page->command);
    md_buf_t b = {.n = 0};
    char summary[512];
    snprintf(summary, sizeof summary, "%s.", page->summary);
    if (strncmp(summary, "ddpipe", 6) != 0)   /* a program's name keeps its case */
        summary[0] = (char)toupper((unsigned char)summary[0]);
    md_text(&b, summary);
    md_wrapped(f, &b, "", "");
    fputc('\n', f);
    md_synopsis(f, page->command, table ? table->synopsis : page->synopsis ? page->synopsis : "");
    for (const char *p = page->description; p && *p;) {
        const char *end = strstr(p, "\n\n");
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char para[4096];
        snprintf(para, sizeof para, "%.*s", (int)n, p);
        b.n = 0;
        md_text(&b, para);
        fputc('\n', f);
        md_wrapped(f, &b, "", "");
        p += n;
        while (*p == '\n')
            p++;
    }
    if (!table)
        return;
    fputc('\n', f);
    b.n = 0;
    md_raw(&b, "Besides the options below: ");
    md_code(&b, "--help");
    md_raw(&b, " (prints them) and ");
    md_code(&b, "--version");
    md_raw(&b, ".");
    md_wrapped(f, &b, "", "");
    bool heading = false;
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        if (opt->type == OPTION_TYPE_SECTION) {
            md_heading(f, opt->name);
            heading = true;
            continue;
        }
        if (!heading) {
            md_heading(f, "options");
            heading = true;
        }
        md_row(f, opt);
    }
}
