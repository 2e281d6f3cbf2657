#include "common/options.h"

#include "common/flags.h"
#include "common/version.h"

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Usage layout: help text starts at most this far right and lines end
 * before this width. */
#define USAGE_MAX_COLUMN 32
#define USAGE_WIDTH 90
/* getopt_long's code of row i: above every char. */
#define ROW_CODE_BASE 256
#define HELP_CODE 'h'
#define VERSION_CODE 'V'

static bool is_option(const option_t *opt)
{
    return opt->type != OPTION_TYPE_SECTION && opt->type != OPTION_TYPE_END;
}

static bool has_field(const option_t *opt)
{
    return is_option(opt) && opt->offset != OPTION_NO_FIELD;
}

static void *field(const option_t *opt, void *opts) { return (char *)opts + opt->offset; }

static const void *field_of(const option_t *opt, const void *opts)
{
    return (const char *)opts + opt->offset;
}

/* "a,b,c" into a list row's field; -1 with "--NAME: why" on stderr. */
static int parse_list(const option_t *opt, const char *text, void *out)
{
    int max = opt->count_max > 0 && opt->count_max < OPTION_LIST_MAX ? opt->count_max
                                                                      : OPTION_LIST_MAX;
    int n = 0;
    double doubles[OPTION_LIST_MAX];
    int ints[OPTION_LIST_MAX];
    int rc = opt->type == OPTION_TYPE_DOUBLES ? flags_doubles(opt->name, text, doubles, max, &n)
                                              : flags_ints(opt->name, text, ints, max, &n);
    if (rc < 0)
        return -1;
    if (n < opt->count_min) {
        if (opt->count_min == max)
            fprintf(stderr, "--%s: want %d values\n", opt->name, max);
        else
            fprintf(stderr, "--%s: want %d to %d values\n", opt->name, opt->count_min, max);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (opt->type == OPTION_TYPE_DOUBLES && (doubles[i] < opt->lo || doubles[i] > opt->hi)) {
            fprintf(stderr, "--%s: %g is out of range [%g, %g]\n", opt->name, doubles[i], opt->lo,
                    opt->hi);
            return -1;
        }
        if (opt->type == OPTION_TYPE_INTS && (ints[i] < opt->long_lo || ints[i] > opt->long_hi)) {
            fprintf(stderr, "--%s: %d is out of range [%ld, %ld]\n", opt->name, ints[i],
                    opt->long_lo, opt->long_hi);
            return -1;
        }
    }
    if (opt->type == OPTION_TYPE_DOUBLES) {
        option_doubles_t *list = out;
        list->n = n;
        memcpy(list->v, doubles, (size_t)n * sizeof doubles[0]);
    } else {
        option_ints_t *list = out;
        list->n = n;
        memcpy(list->v, ints, (size_t)n * sizeof ints[0]);
    }
    return 0;
}

/* One more use of a repeatable string. */
static int add_string(const option_t *opt, option_strings_t *list, const char *text)
{
    int max = opt->count_max > 0 && opt->count_max < OPTION_LIST_MAX ? opt->count_max
                                                                      : OPTION_LIST_MAX;
    if (list->n >= max) {
        fprintf(stderr, "--%s: at most %d times\n", opt->name, max);
        return -1;
    }
    list->v[list->n++] = text;
    return 0;
}

/* One value (text) into the row's field, checked. */
static int set_value(const option_t *opt, void *opts, const char *text)
{
    void *out = field(opt, opts);
    switch (opt->type) {
    case OPTION_TYPE_FLAG: *(int *)out = 1; return 0;
    case OPTION_TYPE_LONG: return flags_long(opt->name, text, opt->long_lo, opt->long_hi, out);
    case OPTION_TYPE_DOUBLE: return flags_double(opt->name, text, opt->lo, opt->hi, out);
    case OPTION_TYPE_STRING: *(const char **)out = text; return 0;
    case OPTION_TYPE_DOUBLES:
    case OPTION_TYPE_INTS: return parse_list(opt, text, out);
    case OPTION_TYPE_STRINGS: return add_string(opt, out, text);
    default: return 0;
    }
}

int options_defaults(const option_table_t *table, void *opts)
{
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        if (!has_field(opt))
            continue;
        void *out = field(opt, opts);
        switch (opt->type) {
        case OPTION_TYPE_FLAG: *(int *)out = 0; break;
        case OPTION_TYPE_LONG: *(long *)out = opt->long_default; break;
        case OPTION_TYPE_DOUBLE: *(double *)out = opt->double_default; break;
        case OPTION_TYPE_STRING: *(const char **)out = opt->text_default; break;
        case OPTION_TYPE_DOUBLES: memset(out, 0, sizeof(option_doubles_t)); break;
        case OPTION_TYPE_INTS: memset(out, 0, sizeof(option_ints_t)); break;
        case OPTION_TYPE_STRINGS: memset(out, 0, sizeof(option_strings_t)); break;
        default: break;
        }
        if ((opt->type == OPTION_TYPE_DOUBLES || opt->type == OPTION_TYPE_INTS) &&
            opt->text_default && parse_list(opt, opt->text_default, out) < 0) {
            fprintf(stderr, "%s: the default of --%s does not parse (bug: please report)\n",
                    table->program, opt->name);
            return -1;
        }
    }
    return 0;
}

/* ---- parsing ------------------------------------------------------------- */

/* A word that is a flag, never a value: "--x", and "--" (the end of the
 * options). "-1" and "-" are values. */
static bool is_flag_word(const char *word) { return strncmp(word, "--", 2) == 0; }

void options_value_words(const option_t *opt, char *buf, size_t cap)
{
    const char *m = opt->metavar ? opt->metavar : "a value";
    bool listed = strchr(m, '|') != NULL;
    for (const char *p = m; listed && *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '|'))
            listed = false;   /* "FILE|numeric": a placeholder among the words */
    if (!listed) {
        snprintf(buf, cap, "%s", m);
        return;
    }
    /* "a|b|c" as "a, b or c" */
    size_t off = 0;
    buf[0] = '\0';
    for (const char *p = m; *p && off + 1 < cap;) {
        size_t n = strcspn(p, "|");
        const char *sep = p == m ? "" : p[n] ? ", " : " or ";
        int w = snprintf(buf + off, cap - off, "%s%.*s", sep, (int)n, p);
        off += w > 0 ? (size_t)w : 0;
        p += n + (p[n] == '|');
    }
}

/* The value getopt_long found for row opt (NULL when an optional value was
 * not joined to its option): the next word for a row with a bare value
 * unless that is a flag, the bare value then. NULL after refusing a flag
 * given as a separate value word; a joined "--name=--x" is taken as
 * written. */
static const char *row_value(const option_table_t *table, const option_t *opt, int argc,
                             char **argv, const char *found)
{
    if (opt->type == OPTION_TYPE_FLAG)
        return found;
    if (opt->bare && !found) {
        /* getopt_long joins an optional value only as --name=V; take
         * "--name V" too (optind past it: permuted with its option) */
        if (optind < argc && !is_flag_word(argv[optind]))
            return argv[optind++];
        return opt->bare;
    }
    if (found && is_flag_word(found) && optind > 0 && found == argv[optind - 1]) {
        char what[256];
        options_value_words(opt, what, sizeof what);
        fprintf(stderr, "%s: --%s needs a value (%s), got the flag %s\n", table->program,
                opt->name, what, found);
        return NULL;
    }
    return found;
}

/* Edit distance of a and b (at most 63 characters count), for a "did you
 * mean" under an unknown option. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strnlen(a, 63), lb = strnlen(b, 63);
    int row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* One line on stderr for the word getopt_long refused (opterr is off, so
 * the whole usage is not dumped on the user): a value missing or given to
 * a flag, an ambiguous abbreviation, or an unknown option with the
 * nearest known one. */
static void report_refused(const option_table_t *table, int rows, const char *word)
{
    const char *name = strncmp(word, "--", 2) == 0 ? word + 2 : word;
    size_t len = strcspn(name, "=");
    char typed[64]; /* the name as typed, without "=value" */
    snprintf(typed, sizeof typed, "%.*s", (int)(len < 63 ? len : 63), name);
    const option_t *exact = NULL, *near = NULL, *prefix_of = NULL;
    /* a suggestion within 1 edit of a short name, a third of a longer one's + 1 */
    int prefixed = 0, best = len >= 4 ? (int)len / 3 + 2 : 2;
    for (int i = 0; i < rows; i++) {
        const option_t *opt = &table->rows[i];
        if (!has_field(opt))
            continue;
        if (strlen(opt->name) == len && strncmp(opt->name, name, len) == 0)
            exact = opt;
        if (strncmp(opt->name, name, len) == 0) {
            prefixed++;
            prefix_of = opt;
        }
        int d = edit_distance(typed, opt->name);
        if (d < best) {
            best = d;
            near = opt;
        }
    }
    if (!exact && prefixed == 1)
        exact = prefix_of; /* getopt_long's abbreviation of it */
    if (exact && exact->type == OPTION_TYPE_FLAG && name[len] == '=') {
        fprintf(stderr, "%s: --%s takes no value (given %s)\n", table->program, exact->name, word);
    } else if (exact) {
        char what[256];
        options_value_words(exact, what, sizeof what);
        fprintf(stderr, "%s: --%s needs a value (%s)\n", table->program, exact->name, what);
    } else if (prefixed > 1) {
        fprintf(stderr, "%s: %s is the start of %d options; write the whole name (%s --help)\n",
                table->program, word, prefixed, table->program);
    } else if (near) {
        fprintf(stderr, "%s: unknown option %.*s; did you mean --%s? (%s --help lists them all)\n",
                table->program, (int)(len + (size_t)(name - word)), word, near->name,
                table->program);
    } else {
        fprintf(stderr, "%s: unknown option %s (%s --help lists them all)\n", table->program,
                word, table->program);
    }
}

static int count_rows(const option_table_t *table)
{
    int n = 0;
    while (table->rows[n].type != OPTION_TYPE_END)
        n++;
    return n;
}

int options_parse(const option_table_t *table, int argc, char **argv, void *opts, int *next_arg)
{
    if (options_defaults(table, opts) < 0)
        return -1;
    int rows = count_rows(table);
    struct option *longopts = calloc((size_t)rows + 3, sizeof *longopts);
    if (!longopts) {
        fprintf(stderr, "%s: out of memory\n", table->program);
        return -1;
    }
    int n = 0;
    for (int i = 0; i < rows; i++) {
        const option_t *opt = &table->rows[i];
        if (has_field(opt))
            longopts[n++] = (struct option){
                opt->name,
                opt->type == OPTION_TYPE_FLAG ? no_argument
                : opt->bare                   ? optional_argument
                                              : required_argument,
                NULL, ROW_CODE_BASE + i};
    }
    longopts[n++] = (struct option){"help", 0, NULL, HELP_CODE};
    longopts[n] = (struct option){"version", 0, NULL, VERSION_CODE};
    int rc = 0, code;
    optind = 0; /* a full restart of getopt's scan, also for a second parse */
    opterr = 0; /* report_refused says it in one line */
    while (rc == 0 && (code = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (code == HELP_CODE) {
            options_usage(table, stdout);
            rc = 1;
        } else if (code == VERSION_CODE) {
            version_print(stdout, table->program);
            rc = 1;
        } else if (code >= ROW_CODE_BASE && code < ROW_CODE_BASE + rows) {
            const option_t *opt = &table->rows[code - ROW_CODE_BASE];
            const char *value = row_value(table, opt, argc, argv, optarg);
            rc = value || opt->type == OPTION_TYPE_FLAG ? set_value(opt, opts, value) : -1;
        } else { /* getopt refused argv[optind - 1] (past it even when it was the last) */
            int at = optind > 1 && optind <= argc ? optind - 1 : 0;
            report_refused(table, rows, at > 0 ? argv[at] : "?");
            rc = -1;
        }
    }
    free(longopts);
    if (next_arg)
        *next_arg = optind;
    return rc;
}

/* ---- text of values -------------------------------------------------------- */

static void list_text(const option_t *opt, const void *list, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    int n = opt->type == OPTION_TYPE_DOUBLES ? ((const option_doubles_t *)list)->n
                                             : ((const option_ints_t *)list)->n;
    for (int i = 0; i < n && off < cap; i++) {
        const char *sep = i ? "," : "";
        int w = opt->type == OPTION_TYPE_DOUBLES
                    ? snprintf(buf + off, cap - off, "%s%.17g", sep,
                               ((const option_doubles_t *)list)->v[i])
                    : snprintf(buf + off, cap - off, "%s%d", sep,
                               ((const option_ints_t *)list)->v[i]);
        off += w > 0 ? (size_t)w : 0;
    }
}

int options_value_text(const option_t *opt, const void *opts, char *buf, size_t cap)
{
    const void *in = field_of(opt, opts);
    buf[0] = '\0';
    switch (opt->type) {
    case OPTION_TYPE_FLAG: return *(const int *)in != 0;
    case OPTION_TYPE_LONG: snprintf(buf, cap, "%ld", *(const long *)in); return 1;
    case OPTION_TYPE_DOUBLE:
        snprintf(buf, cap, "%.17g", *(const double *)in);
        return !isnan(*(const double *)in);
    case OPTION_TYPE_STRING: {
        const char *s = *(const char *const *)in;
        if (!s)
            return 0;
        snprintf(buf, cap, "%s", s);
        return 1;
    }
    case OPTION_TYPE_DOUBLES:
    case OPTION_TYPE_INTS: list_text(opt, in, buf, cap); return 1;
    case OPTION_TYPE_STRINGS: {
        const option_strings_t *list = in;
        for (int i = 0, off = 0; i < list->n && off < (int)cap; i++)
            off += snprintf(buf + off, cap - (size_t)off, "%s%s", i ? "," : "", list->v[i]);
        return list->n > 0;
    }
    default: return 0;
    }
}

void options_default_text(const option_t *opt, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!has_field(opt))
        return;
    /* a default outside the range is a sentinel ("derived, see the help"):
     * no number to show */
    if (opt->type == OPTION_TYPE_LONG) {
        if (opt->long_default >= opt->long_lo && opt->long_default <= opt->long_hi)
            snprintf(buf, cap, "%ld", opt->long_default);
    } else if (opt->type == OPTION_TYPE_DOUBLE) {
        if (opt->double_default >= opt->lo && opt->double_default <= opt->hi)
            snprintf(buf, cap, "%g", opt->double_default);
    }
    else if (opt->type != OPTION_TYPE_FLAG && opt->text_default)
        snprintf(buf, cap, "%s", opt->text_default);
}

/* ---- usage ------------------------------------------------------------------ */

static int left_width(const option_t *opt)
{
    return 4 + (int)strlen(opt->name) +
           (opt->metavar ? 1 + (int)strlen(opt->metavar) + (opt->bare ? 2 : 0) : 0);
}

/* Words of text, wrapped to lines of USAGE_WIDTH starting at column. */
static void print_wrapped(FILE *f, const char *text, int column, int at)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t word = strcspn(p, " ");
        if (!word)
            break;
        if (at > column && at + 1 + (int)word > USAGE_WIDTH) {
            fprintf(f, "\n%*s", column, "");
            at = column;
        } else if (at > column) {
            fputc(' ', f);
            at++;
        }
        fprintf(f, "%.*s", (int)word, p);
        at += (int)word;
        p += word;
    }
    fputc('\n', f);
}

void options_usage(const option_table_t *table, FILE *f)
{
    int column = 0;
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        int width = is_option(opt) ? left_width(opt) + 2 : 0;
        if (width > column && width <= USAGE_MAX_COLUMN)
            column = width;
    }
    fprintf(f, "usage: %s %s\n", table->program, table->synopsis);
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        if (opt->type == OPTION_TYPE_SECTION) {
            fprintf(f, "%s\n", opt->name);
            continue;
        }
        char def[256], help[2048];
        options_default_text(opt, def, sizeof def);
        int off = snprintf(help, sizeof help, "%s%s%s%s", opt->help ? opt->help : "",
                           def[0] ? " (default " : "", def, def[0] ? ")" : "");
        if (opt->bare && off >= 0 && (size_t)off < sizeof help)
            snprintf(help + off, sizeof help - (size_t)off, "%s(--%s alone: %s)",
                     off ? " " : "", opt->name, opt->bare);
        const char *meta = opt->metavar ? opt->metavar : "";
        int at = opt->bare ? fprintf(f, "  --%s [%s]", opt->name, meta)
                           : fprintf(f, "  --%s%s%s", opt->name, *meta ? " " : "", meta);
        if (!help[0]) {
            fputc('\n', f);
            continue;
        }
        if (at + 2 > column) {
            fputc('\n', f);
            at = 0;
        }
        fprintf(f, "%*s", column - at, "");
        print_wrapped(f, help, column, column);
    }
}

/* ---- emit ------------------------------------------------------------------- */

static bool differs_from_default(const option_t *opt, const void *opts)
{
    const void *in = field_of(opt, opts);
    switch (opt->type) {
    case OPTION_TYPE_FLAG: return *(const int *)in != 0;
    case OPTION_TYPE_LONG: return *(const long *)in != opt->long_default;
    case OPTION_TYPE_DOUBLE: {
        double v = *(const double *)in;
        return isnan(v) ? !isnan(opt->double_default) : v != opt->double_default;
    }
    case OPTION_TYPE_STRINGS: return ((const option_strings_t *)in)->n > 0;
    case OPTION_TYPE_STRING: {
        const char *s = *(const char *const *)in, *d = opt->text_default;
        return (s == NULL) != (d == NULL) || (s && strcmp(s, d) != 0);
    }
    case OPTION_TYPE_DOUBLES:
    case OPTION_TYPE_INTS: {
        char now[1024], def[1024] = "";
        list_text(opt, in, now, sizeof now);
        if (opt->text_default) {
            union {
                option_doubles_t doubles;
                option_ints_t ints;
            } parsed;
            if (parse_list(opt, opt->text_default, &parsed) == 0)
                list_text(opt, &parsed, def, sizeof def);
        }
        return strcmp(now, def) != 0;
    }
    default: return false;
    }
}

/* One flag and its value; a value that begins with "--" joined to its flag
 * ("--name=--x"), the one form options_parse takes it in. */
static void emit_one(option_emit_fn *fn, void *arg, const char *flag, const char *value)
{
    if (!value || !is_flag_word(value)) {
        fn(arg, flag, value);
        return;
    }
    size_t n = strlen(flag) + 1 + strlen(value) + 1;
    char *joined = malloc(n);
    if (!joined) { /* cannot happen in practice; the child then refuses the value, said */
        fn(arg, flag, value);
        return;
    }
    snprintf(joined, n, "%s=%s", flag, value);
    fn(arg, joined, NULL);
    free(joined);
}

static int emit_strings(const char *flag, const option_strings_t *list, option_emit_fn *fn,
                        void *arg)
{
    for (int i = 0; i < list->n; i++)
        emit_one(fn, arg, flag, list->v[i]);
    return list->n;
}

static bool named(const char *const *only, const char *name)
{
    for (; *only; only++)
        if (strcmp(*only, name) == 0)
            return true;
    return false;
}

int options_emit(const option_table_t *table, const void *opts, const char *const *only,
                 option_emit_fn *fn, void *arg)
{
    for (const char *const *name = only; name && *name; name++) {
        const option_t *opt = options_find(table, *name);
        if (!opt || !has_field(opt)) {
            fprintf(stderr, "%s: cannot pass --%s on: not a parsed option of its table (bug)\n",
                    table->program, *name);
            return -1;
        }
    }
    int emitted = 0;
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        if (!has_field(opt))
            continue;
        if (only ? !named(only, opt->name) : !differs_from_default(opt, opts))
            continue;
        char flag[128], value[1024];
        if (!options_value_text(opt, opts, value, sizeof value))
            continue;
        snprintf(flag, sizeof flag, "--%s", opt->name);
        if (opt->type == OPTION_TYPE_STRINGS) {
            emitted += emit_strings(flag, field_of(opt, opts), fn, arg);
            continue;
        }
        const char *text = value;
        if (opt->type == OPTION_TYPE_STRING) /* not truncated: the struct's own string */
            text = *(const char *const *)field_of(opt, opts);
        emit_one(fn, arg, flag, opt->type == OPTION_TYPE_FLAG ? NULL : text);
        emitted++;
    }
    return emitted;
}

/* ---- walking the table ----------------------------------------------------------- */

const option_t *options_find(const option_table_t *table, const char *name)
{
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++)
        if (is_option(opt) && strcmp(opt->name, name) == 0)
            return opt;
    return NULL;
}

void options_foreach(const option_table_t *table, option_visit_fn *fn, void *arg)
{
    const char *section = NULL;
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        if (opt->type == OPTION_TYPE_SECTION)
            section = opt->name;
        fn(arg, opt, section);
    }
}
