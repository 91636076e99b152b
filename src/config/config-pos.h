/* SPDX-License-Identifier: MIT */
/*
 * Positions for config messages. jansson gives values but not where they are, so this is a
 * small strict JSON scanner that maps every JSON path ("configList[0].selectors.devics") to
 * the line:column of its key and of its value. It also finds syntax errors and words that
 * lost their quotes (text copied from a web page), with friendlier messages than jansson's.
 *
 * Paths: a member of the root object is "key", of any other object "parent.key"; a key that
 * is not [A-Za-z0-9_]+ is written parent["key"]. Array elements are "parent[3]". The root
 * value itself is "". Lines and columns are 1-based; columns count characters (UTF-8 code
 * points), as editors and jansson do, not bytes.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define RDP_JSON_MAX_DEPTH 32
#define RDP_JSON_MAX_KEY 256 /* longer keys are cut in paths (positions stay right) */

struct rdp_json_pos {
	unsigned int line, col;
};

struct rdp_json_syntax {
	struct rdp_json_pos pos; /* of the first error */
	char msg[320];           /* "keys must be quoted: \"periodicUpdateInterval\"" */
	/* Words without quotes seen in all (the scanner goes on past them); 0 when none. */
	unsigned int n_unquoted;
	/* A duplicate key: where the first one was (pos is the second). line 0 otherwise. */
	struct rdp_json_pos first;
};

struct rdp_json_index;

/*
 * Scans text. Returns 0 and an index; -EINVAL on a syntax error or duplicate key (err is
 * filled); -ENOMEM. err may be NULL.
 */
int rdp_json_index_build(const char *text, size_t len, struct rdp_json_index **ret,
			 struct rdp_json_syntax *err);
/* Looks path up; false when absent. ret_key is the value's position for array elements. */
bool rdp_json_index_find(const struct rdp_json_index *idx, const char *path,
			 struct rdp_json_pos *ret_key, struct rdp_json_pos *ret_value);
struct rdp_json_index *rdp_json_index_free(struct rdp_json_index *idx);

/*
 * Writes parent + key as a path into buf (see above), truncating safely. Returns buf.
 * rdp_json_path_index does the same for an array element.
 */
char *rdp_json_path_key(char *buf, size_t size, const char *parent, const char *key);
char *rdp_json_path_index(char *buf, size_t size, const char *parent, size_t i);
