/* options_doc — man pages, Markdown and bash completion from the option tables
 * (common/options.h): the rows a program parses are the rows documented.
 *
 * A metavar of lowercase words joined by '|' ("none|step|cosine", or one
 * word: "cpu") lists the values the option accepts: the man page says so
 * and the completion offers them. Metavars naming a path (PATH, FILE, DIR,
 * PREFIX) complete file names; any other value is left to the user. */
#ifndef DDP_OPTIONS_DOC_H
#define DDP_OPTIONS_DOC_H

#include "common/options.h"

#include <stdio.h>

/* What a man page says beyond the table. */
typedef struct {
    const char *name;        /* "ddpipe-eval": the page, NAME section's word */
    const char *section;     /* "1" */
    const char *command;     /* "ddpipe eval": the synopsis' command */
    const char *summary;     /* one line, NAME section */
    const char *synopsis;    /* when there is no table (else the table's) */
    const char *description; /* paragraphs split by "\n\n"; may be NULL */
    const char *see_also;    /* "ddpipe(1), loaderd(1)"; may be NULL */
} options_page_t;

/* The page in roff (man(7)): NAME, SYNOPSIS (table->synopsis), DESCRIPTION,
 * OPTIONS (one .TP per row, sections as .SS, defaults and accepted values
 * said), SEE ALSO. table may be NULL: a page with no options, its synopsis
 * page->synopsis. */
void options_man(const option_table_t *table, const options_page_t *page, FILE *f);

/* The page in Markdown (GitHub's), for docs/USAGE.md: "## COMMAND", the
 * summary, the synopsis as a code block, the description, then one list
 * item per option ("- `--name META`: help. Default: `D`.") under "###"
 * headings (the table's sections; "Options" above the first), wrapped at
 * 90 columns. No version or date: the text changes only with the tables. */
void options_markdown(const option_table_t *table, const options_page_t *page, FILE *f);

/* Escapes text for roff: backslashes, '-' as \-, a leading '.' or '\''. */
void options_roff_text(FILE *f, const char *text);

/* The accepted values of opt ("none step cosine", space-separated) into
 * buf; 0 when the metavar lists none. */
int options_choices(const option_t *opt, char *buf, size_t cap);

/* Bash: the case arms that complete a value after a flag of the table
 * ("--optimizer) COMPREPLY=(...);;"), one per option taking a value, and the
 * flags as a word list: "--data --model ..." (--help and --version included). */
void options_bash_value_arms(const option_table_t *table, FILE *f, const char *indent);
void options_bash_flags(const option_table_t *table, FILE *f);

#endif
