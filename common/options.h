/* options — one declared table of a program's command-line options.
 *
 * Each option is declared once, in the program's options.c, as a row of a
 * static table (in the manner of Redis's static config table): its long
 * name, type, default, range, help text and the offset of the field it
 * fills in the program's options struct. From that one row:
 *
 *   options_parse   fills the struct from argv (defaults first, then the
 *                   flags; values checked by common/flags.c: "--NAME: why")
 *   options_usage   prints the usage text, grouped under section headings
 *   options_emit    gives back the argv that starts the program with a
 *                   filled struct (what differs from the defaults, or the
 *                   options named) — for a CLI that starts its daemons
 *   options_foreach walks the table (man pages, shell completion)
 *
 * A table:
 *
 *   #define T my_options_t
 *   static const option_t s_rows[] = {
 *       OPTION_STRING(T, bind, "bind", "EP", NULL, "ROUTER endpoint"),
 *       OPTION_LONG(T, workers, "workers", "N", 1, 1, 4096, "ranks expected"),
 *       OPTION_SECTION("training:"),
 *       OPTION_FLAG(T, train, "train", "coordinate a training job"),
 *       OPTION_END};
 *   const option_table_t my_table = {"prog", "--bind EP [options]", s_rows};
 *
 * A default outside the row's range (a long, or a double; NAN for a double)
 * is a sentinel: "not given, the program derives it" (the help says how).
 * The usage shows no default for it, options_emit passes it on only when
 * the value differs (NAN equals NAN), and the program tests the field
 * against the sentinel.
 *
 * A value is never a flag: "--out --overwrite" is refused ("--out needs a
 * value (DIR), got the flag --overwrite") instead of taking --overwrite as
 * the directory and the next word as an operand. A value that really
 * begins with "--" is given joined, "--name=--x" (options_emit passes such
 * values so). Values such as "-1" or "-" stay values.
 *
 * A row may have a bare value (OPTION_STRING_BARE): the option then takes a
 * value only when one follows it ("--predictions probs", or
 * "--predictions=probs"), and given alone (followed by a flag or by nothing)
 * it means the bare value: a flag that grew a value stays compatible.
 *
 * Field types (checked at compile time by the row macros): a flag fills an
 * int (0, or 1 when given), a long a long, a double a double, a string a
 * const char * (pointing into argv or at the default), a list of doubles an
 * option_doubles_t, a list of integers an option_ints_t and a repeatable
 * string (each use adds one) an option_strings_t.
 */
#ifndef DDP_OPTIONS_H
#define DDP_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#define OPTION_LIST_MAX 16

typedef struct {
    int n;
    double v[OPTION_LIST_MAX];
} option_doubles_t;

typedef struct {
    int n;
    int v[OPTION_LIST_MAX];
} option_ints_t;

typedef struct {
    int n;
    const char *v[OPTION_LIST_MAX];   /* pointing into argv */
} option_strings_t;

typedef enum {
    OPTION_TYPE_END = 0,   /* the table's last row */
    OPTION_TYPE_SECTION,   /* not an option: a usage heading (name is its text) */
    OPTION_TYPE_FLAG,      /* no value; int field set to 1 */
    OPTION_TYPE_LONG,      /* long in [long_lo, long_hi] */
    OPTION_TYPE_DOUBLE,    /* double in [lo, hi] */
    OPTION_TYPE_STRING,    /* const char * */
    OPTION_TYPE_DOUBLES,   /* "a,b,c": count_min..count_max doubles, each in [lo, hi] */
    OPTION_TYPE_INTS,      /* "a,b,c": count_min..count_max ints in [long_lo, long_hi], >= 0 */
    OPTION_TYPE_STRINGS,   /* repeatable: each use adds one string, at most count_max */
} option_type_t;

/* The field offset of a row that fills no field: the option is declared
 * for usage, man pages and completion, but another function takes it out
 * of argv before options_parse (common/zsecurity.c's --curve-dir and
 * --insecure). options_parse refuses it (it would be ignored silently)
 * and options_emit never emits it. */
#define OPTION_NO_FIELD ((size_t)-1)

typedef struct {
    const char *name;       /* long name without "--"; a section's heading */
    option_type_t type;
    size_t offset;          /* offsetof the field in the options struct */
    const char *metavar;    /* the value's name in usage ("N", "EP"); NULL for a flag */
    const char *help;       /* one paragraph; usage wraps it */
    long long_default;      /* OPTION_TYPE_LONG */
    long long_lo, long_hi;  /* OPTION_TYPE_LONG, OPTION_TYPE_INTS */
    double double_default;  /* OPTION_TYPE_DOUBLE */
    double lo, hi;          /* OPTION_TYPE_DOUBLE, OPTION_TYPE_DOUBLES */
    const char *text_default; /* OPTION_TYPE_STRING, and the lists as text ("16,160"); NULL: none */
    int count_min, count_max; /* lists: how many values */
    const char *bare;       /* the value when the option is given alone; NULL: it needs one */
} option_t;

typedef struct {
    const char *program;    /* "reducerd" */
    const char *synopsis;   /* after "usage: PROGRAM " */
    const option_t *rows;   /* ends with OPTION_END */
} option_table_t;

/* Compile-time check that FIELD of TYPE has type FT (a "comparison of
 * distinct pointer types" error otherwise), then its offset. */
#define OPTION_FIELD(TYPE, FIELD, FT) \
    (offsetof(TYPE, FIELD) + 0 * sizeof(&((TYPE *)0)->FIELD == (FT *)0))

#define OPTION_FLAG(TYPE, FIELD, NAME, HELP) \
    {.name = NAME, .type = OPTION_TYPE_FLAG, .offset = OPTION_FIELD(TYPE, FIELD, int), .help = HELP}
#define OPTION_LONG(TYPE, FIELD, NAME, META, DEF, LO, HI, HELP)                               \
    {.name = NAME, .type = OPTION_TYPE_LONG, .offset = OPTION_FIELD(TYPE, FIELD, long),       \
     .metavar = META, .help = HELP, .long_default = DEF, .long_lo = LO, .long_hi = HI}
#define OPTION_DOUBLE(TYPE, FIELD, NAME, META, DEF, LO, HI, HELP)                             \
    {.name = NAME, .type = OPTION_TYPE_DOUBLE, .offset = OPTION_FIELD(TYPE, FIELD, double),   \
     .metavar = META, .help = HELP, .double_default = DEF, .lo = LO, .hi = HI}
#define OPTION_STRING(TYPE, FIELD, NAME, META, DEF, HELP)                                     \
    {.name = NAME, .type = OPTION_TYPE_STRING,                                                \
     .offset = OPTION_FIELD(TYPE, FIELD, const char *), .metavar = META, .help = HELP,        \
     .text_default = DEF}
/* A string option that may be given alone, meaning BARE (see above). */
#define OPTION_STRING_BARE(TYPE, FIELD, NAME, META, DEF, BARE, HELP)                          \
    {.name = NAME, .type = OPTION_TYPE_STRING,                                                \
     .offset = OPTION_FIELD(TYPE, FIELD, const char *), .metavar = META, .help = HELP,        \
     .text_default = DEF, .bare = BARE}
#define OPTION_DOUBLES(TYPE, FIELD, NAME, META, DEF, CMIN, CMAX, LO, HI, HELP)                \
    {.name = NAME, .type = OPTION_TYPE_DOUBLES,                                               \
     .offset = OPTION_FIELD(TYPE, FIELD, option_doubles_t), .metavar = META, .help = HELP,    \
     .text_default = DEF, .count_min = CMIN, .count_max = CMAX, .lo = LO, .hi = HI}
#define OPTION_INTS(TYPE, FIELD, NAME, META, DEF, CMIN, CMAX, LO, HI, HELP)                   \
    {.name = NAME, .type = OPTION_TYPE_INTS,                                                  \
     .offset = OPTION_FIELD(TYPE, FIELD, option_ints_t), .metavar = META, .help = HELP,       \
     .text_default = DEF, .count_min = CMIN, .count_max = CMAX, .long_lo = LO, .long_hi = HI}
#define OPTION_STRINGS(TYPE, FIELD, NAME, META, CMAX, HELP)                                 \
    {.name = NAME, .type = OPTION_TYPE_STRINGS,                                               \
     .offset = OPTION_FIELD(TYPE, FIELD, option_strings_t), .metavar = META, .help = HELP,    \
     .count_max = CMAX}
/* Declared (usage, man page, completion) but taken out of argv before
 * options_parse; see OPTION_NO_FIELD. OPTION_TYPE: OPTION_TYPE_FLAG, or
 * OPTION_TYPE_STRING for one that takes a value. */
#define OPTION_ELSEWHERE(OPTION_TYPE, NAME, META, HELP)                                      \
    {.name = NAME, .type = OPTION_TYPE, .offset = OPTION_NO_FIELD, .metavar = META, .help = HELP}
#define OPTION_SECTION(HEADING) {.name = HEADING, .type = OPTION_TYPE_SECTION}
#define OPTION_END {.name = NULL, .type = OPTION_TYPE_END}

/* Fills every field of opts with its default. -1 (said on stderr) when a
 * list's default text does not parse: a bug in the table. */
int options_defaults(const option_table_t *table, void *opts);

/* Defaults, then argv (getopt_long: --name VALUE, --name=VALUE, unique
 * prefixes; operands are permuted to the end). Returns 0; 1 after --help
 * printed the usage, or --version the version (common/version.h), on
 * stdout; -1 after the error went to stderr ("--NAME: why" for a bad value;
 * "PROGRAM: --NAME needs a value (WHAT), got the flag --X" for a flag where
 * the value belongs; an unknown option or a missing value also prints the
 * usage). *next_arg (may be NULL) gets the index of the first operand. */
int options_parse(const option_table_t *table, int argc, char **argv, void *opts, int *next_arg);

/* "usage: PROGRAM SYNOPSIS", then one entry per row: "  --name META"
 * ("  --name [META]" for a row with a bare value) and the help wrapped
 * beside it, with "(default D)" and "(--name alone: B)" where they apply;
 * sections as their heading. */
void options_usage(const option_table_t *table, FILE *f);

/* What the row's value is, for messages: its choices when the metavar lists
 * them ("topk, probs or all" from "topk|probs|all"), else the metavar. */
void options_value_words(const option_t *opt, char *buf, size_t cap);

/* The value of row `opt` in opts as text ("" for a flag; a repeatable
 * string's values joined by ","); false when a flag is unset, a string
 * NULL, a double NAN or a repeatable string never given (nothing to pass). */
int options_value_text(const option_t *opt, const void *opts, char *buf, size_t cap);
/* The default as text ("" when there is none). */
void options_default_text(const option_t *opt, char *buf, size_t cap);

/* Called with ("--name", value) per option to pass, value NULL for a flag
 * (the shape of cli/argv.h's argv_add); a repeatable string once per value. */
typedef void option_emit_fn(void *arg, const char *flag, const char *value);
/* The options of opts a child program needs to get the same struct from
 * options_parse: with only NULL, every option whose value differs from its
 * default; else exactly the options named in `only` (NULL-terminated), in
 * table order, whatever their value (a flag only when set, a NAN double
 * never). Rows without a field are never emitted. Returns the number of
 * flags emitted (a repeatable string's once per value), or -1 when `only`
 * names an option the table lacks. */
int options_emit(const option_table_t *table, const void *opts, const char *const *only,
                 option_emit_fn *fn, void *arg);

/* The row called name (without "--"), or NULL. */
const option_t *options_find(const option_table_t *table, const char *name);
/* Calls fn for every row in table order, sections included (the hook for
 * generated man pages and shell completion). section: the heading above
 * the row, NULL before the first. */
typedef void option_visit_fn(void *arg, const option_t *opt, const char *section);
void options_foreach(const option_table_t *table, option_visit_fn *fn, void *arg);

#endif
