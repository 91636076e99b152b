/* SPDX-License-Identifier: MIT */
#include "config-pos.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "macro.h"

#define PATH_MAX_LEN 4096
#define MAX_ENTRIES (1u << 20)

struct entry {
	char *path;
	size_t parent_len; /* path[parent_len] starts the last component */
	size_t order;      /* document order */
	struct rdp_json_pos key, value;
};

struct rdp_json_index {
	struct entry *v; /* sorted by (path, order) */
	size_t n;
};

struct scanner {
	const char *s;
	size_t len, i;
	struct rdp_json_pos pos; /* of s[i] */
	struct rdp_json_syntax *err;
	bool failed; /* a hard error: scanning stopped */
	bool has_error;
	int r;       /* -ENOMEM once allocation failed */
	struct entry *v;
	size_t n, cap;
	char path[PATH_MAX_LEN];
	size_t plen;
};

static bool is_ident(const char *k)
{
	if (!*k)
		return false;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
		      (*k >= '0' && *k <= '9') || *k == '_'))
			return false;
	return true;
}

char *rdp_json_path_key(char *buf, size_t size, const char *parent, const char *key)
{
	size_t n;

	if (!size)
		return buf;
	snprintf(buf, size, "%s", parent);
	n = strlen(buf);
	if (is_ident(key)) {
		snprintf(buf + n, size - n, "%s%s", *parent ? "." : "", key);
		return buf;
	}
	/* ["key"] with '"' and '\' escaped and control characters shown as '?'. */
	if (n + 2 < size) {
		buf[n++] = '[';
		buf[n++] = '"';
	}
	for (; *key && n + 4 < size; key++) {
		unsigned char c = (unsigned char)*key;

		if (c == '"' || c == '\\')
			buf[n++] = '\\';
		buf[n++] = c < 0x20 ? '?' : (char)c;
	}
	if (n + 2 < size) {
		buf[n++] = '"';
		buf[n++] = ']';
	}
	buf[n] = '\0';
	return buf;
}

char *rdp_json_path_index(char *buf, size_t size, const char *parent, size_t i)
{
	snprintf(buf, size, "%s[%zu]", parent, i);
	return buf;
}

static _printf_(3, 4) void sc_error(struct scanner *sc, struct rdp_json_pos at, const char *fmt,
				     ...)
{
	va_list ap;

	if (sc->has_error)
		return;
	sc->has_error = true;
	sc->err->pos = at;
	va_start(ap, fmt);
	vsnprintf(sc->err->msg, sizeof(sc->err->msg), fmt, ap);
	va_end(ap);
}

/* A hard error: the first one is kept and scanning stops. */
#define sc_fail(sc, at, ...)                                                                       \
	do {                                                                                       \
		sc_error(sc, at, __VA_ARGS__);                                                     \
		(sc)->failed = true;                                                               \
	} while (0)

static int peek(const struct scanner *sc)
{
	return sc->i < sc->len ? (unsigned char)sc->s[sc->i] : -1;
}

static int peek_at(const struct scanner *sc, size_t off)
{
	return sc->i + off < sc->len ? (unsigned char)sc->s[sc->i + off] : -1;
}

static void adv(struct scanner *sc)
{
	unsigned char c;

	if (sc->i >= sc->len)
		return;
	c = (unsigned char)sc->s[sc->i++];
	if (c == '\n') {
		sc->pos.line++;
		sc->pos.col = 1;
	} else if ((c & 0xc0) != 0x80) {
		/* Count code points: continuation bytes do not start a column. */
		sc->pos.col++;
	}
}

/* The next character, quoted for a message: 'x', or "end of file". */
static const char *describe(const struct scanner *sc, char buf[static 16])
{
	int c = peek(sc);

	if (c < 0)
		return "end of file";
	if (c < 0x20 || c >= 0x7f)
		snprintf(buf, 16, "byte 0x%02x", (unsigned int)c);
	else
		snprintf(buf, 16, "'%c'", c);
	return buf;
}

static void skip_ws(struct scanner *sc)
{
	for (;;) {
		int c = peek(sc);

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			adv(sc);
		} else if (c == '/' && (peek_at(sc, 1) == '/' || peek_at(sc, 1) == '*')) {
			sc_fail(sc, sc->pos, "comments are not allowed in JSON");
			return;
		} else {
			return;
		}
	}
}

static int record(struct scanner *sc, size_t parent_len, struct rdp_json_pos key,
		  struct rdp_json_pos value)
{
	struct entry *e;

	if (sc->n >= MAX_ENTRIES) {
		sc_fail(sc, value, "too many values (more than %u)", MAX_ENTRIES);
		return -EINVAL;
	}
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 64;

		e = rdp_reallocarray(sc->v, cap, sizeof(*e));
		if (!e)
			return sc->r = -ENOMEM;
		sc->v = e;
		sc->cap = cap;
	}
	e = &sc->v[sc->n];
	e->path = rdp_strdup(sc->path);
	if (!e->path)
		return sc->r = -ENOMEM;
	e->parent_len = parent_len;
	e->order = sc->n;
	e->key = key;
	e->value = value;
	sc->n++;
	return 0;
}

static bool is_word_char(int c, bool key_mode, int next)
{
	if (c < 0 || c == ' ' || c == '\t' || c == '\n' || c == '\r')
		return false;
	if (strchr("{}[],\"'", c))
		return false;
	if (c == ':')
		/* "0000:81:00.0" stays one word; "key: value" does not. */
		return !key_mode && next >= 0 && !strchr(" \t\r\n{}[],\"'", next);
	return true;
}

static bool is_json_number(const char *w, size_t n)
{
	size_t i = 0;

	if (i < n && w[i] == '-')
		i++;
	if (i >= n)
		return false;
	if (w[i] == '0') {
		i++;
	} else if (w[i] >= '1' && w[i] <= '9') {
		while (i < n && w[i] >= '0' && w[i] <= '9')
			i++;
	} else {
		return false;
	}
	if (i < n && w[i] == '.') {
		size_t s = ++i;

		while (i < n && w[i] >= '0' && w[i] <= '9')
			i++;
		if (i == s)
			return false;
	}
	if (i < n && (w[i] == 'e' || w[i] == 'E')) {
		size_t s;

		i++;
		if (i < n && (w[i] == '+' || w[i] == '-'))
			i++;
		s = i;
		while (i < n && w[i] >= '0' && w[i] <= '9')
			i++;
		if (i == s)
			return false;
	}
	return i == n;
}

/* Reads a bare word (anything up to a delimiter); returns its length, start in *ret_start. */
static size_t read_word(struct scanner *sc, bool key_mode, const char **ret_start)
{
	size_t start = sc->i;

	while (is_word_char(peek(sc), key_mode, peek_at(sc, 1)))
		adv(sc);
	*ret_start = sc->s + start;
	return sc->i - start;
}

static void put_utf8(char *buf, size_t size, size_t *n, uint32_t cp)
{
	char tmp[4];
	size_t k;

	if (cp < 0x80) {
		tmp[0] = (char)cp;
		k = 1;
	} else if (cp < 0x800) {
		tmp[0] = (char)(0xc0 | (cp >> 6));
		tmp[1] = (char)(0x80 | (cp & 0x3f));
		k = 2;
	} else if (cp < 0x10000) {
		tmp[0] = (char)(0xe0 | (cp >> 12));
		tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		tmp[2] = (char)(0x80 | (cp & 0x3f));
		k = 3;
	} else {
		tmp[0] = (char)(0xf0 | (cp >> 18));
		tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		tmp[3] = (char)(0x80 | (cp & 0x3f));
		k = 4;
	}
	if (buf && *n + k < size) {
		memcpy(buf + *n, tmp, k);
		*n += k;
	}
}

static int hex4(const struct scanner *sc, size_t off, uint32_t *ret)
{
	uint32_t v = 0;

	for (size_t k = 0; k < 4; k++) {
		int c = peek_at(sc, off + k);

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -EINVAL;
	}
	*ret = v;
	return 0;
}

/* At '"': checks a string and decodes it into buf (may be NULL), cut to size - 1 bytes. */
static void scan_string(struct scanner *sc, char *buf, size_t size)
{
	struct rdp_json_pos start = sc->pos;
	size_t n = 0;

	adv(sc);
	for (;;) {
		int c = peek(sc);

		if (c < 0) {
			sc_fail(sc, start, "unterminated string");
			break;
		}
		if (c == '"') {
			adv(sc);
			break;
		}
		if (c == '\n') {
			sc_fail(sc, start, "unterminated string (a string cannot span lines)");
			break;
		}
		if (c < 0x20) {
			sc_fail(sc, sc->pos, "control character 0x%02x in a string", (unsigned int)c);
			break;
		}
		if (c == '\\') {
			struct rdp_json_pos at = sc->pos;
			int e = peek_at(sc, 1);
			const char *p;
			uint32_t cp;

			if (e == 'u') {
				if (hex4(sc, 2, &cp) < 0) {
					sc_fail(sc, at, "invalid \\u escape: expected 4 hex digits");
					break;
				}
				for (int k = 0; k < 6; k++)
					adv(sc);
				if (cp >= 0xd800 && cp <= 0xdbff && peek(sc) == '\\' &&
				    peek_at(sc, 1) == 'u') {
					uint32_t lo;

					if (hex4(sc, 2, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
						cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
						for (int k = 0; k < 6; k++)
							adv(sc);
					}
				}
				if (cp >= 0xd800 && cp <= 0xdfff)
					cp = 0xfffd;
				put_utf8(buf, size, &n, cp);
				continue;
			}
			p = e > 0 ? strchr("\"\\/bfnrt", e) : NULL;
			if (!p) {
				sc_fail(sc, at, "invalid escape in a string");
				break;
			}
			put_utf8(buf, size, &n, (uint32_t)"\"\\/\b\f\n\r\t"[p - "\"\\/bfnrt"]);
			adv(sc);
			adv(sc);
			continue;
		}
		if (buf && n + 1 < size)
			buf[n++] = (char)c;
		adv(sc);
	}
	if (buf && size)
		buf[n] = '\0';
}

/* Appends a component to sc->path; returns the previous length to restore. */
static size_t path_push_key(struct scanner *sc, const char *key)
{
	size_t old = sc->plen;
	char tmp[PATH_MAX_LEN];

	memcpy(tmp, sc->path, old + 1);
	rdp_json_path_key(sc->path, sizeof(sc->path), tmp, key);
	sc->plen = strlen(sc->path);
	return old;
}

static size_t path_push_index(struct scanner *sc, size_t i)
{
	size_t old = sc->plen;

	snprintf(sc->path + old, sizeof(sc->path) - old, "[%zu]", i);
	sc->plen = strlen(sc->path);
	return old;
}

static void path_pop(struct scanner *sc, size_t old)
{
	sc->plen = old;
	sc->path[old] = '\0';
}

static void scan_value(struct scanner *sc, unsigned int depth, size_t parent_len,
		       const struct rdp_json_pos *key);

/*
 * After a member or an element: pops its path, then takes a ',' (1: another follows; *comma is
 * where it stood) or close (0: the container ends). -1 when the scanner stopped, or with *found
 * the character that came instead, for the caller's message.
 */
static int next_item(struct scanner *sc, size_t old, int close, struct rdp_json_pos *comma,
		     int *found)
{
	path_pop(sc, old);
	if (sc->failed || sc->r)
		return -1;
	skip_ws(sc);
	if (sc->failed)
		return -1;
	*found = peek(sc);
	if (*found == ',') {
		*comma = sc->pos;
		adv(sc);
		return 1;
	}
	if (*found == close) {
		adv(sc);
		return 0;
	}
	return -1;
}

static void scan_object(struct scanner *sc, unsigned int depth)
{
	struct rdp_json_pos comma = { 0, 0 };
	char key[RDP_JSON_MAX_KEY];
	char d[16];

	adv(sc); /* '{' */
	for (;;) {
		struct rdp_json_pos kpos;
		size_t old;
		int c, k;

		skip_ws(sc);
		if (sc->failed || sc->r)
			return;
		c = peek(sc);
		kpos = sc->pos;
		if (c == '}') {
			if (comma.line)
				sc_fail(sc, comma, "trailing comma before '}'");
			adv(sc);
			return;
		}
		if (c == '"') {
			scan_string(sc, key, sizeof(key));
		} else if (c == '\'') {
			sc_fail(sc, kpos, "strings must use double quotes, not single quotes");
		} else if (c >= 0 && is_word_char(c, true, peek_at(sc, 1))) {
			const char *w;
			size_t n = read_word(sc, true, &w);

			snprintf(key, sizeof(key), "%.*s", (int)n, w);
			sc->err->n_unquoted++;
			sc_error(sc, kpos, "keys must be quoted: \"%.*s\"", (int)(n > 64 ? 64 : n), w);
		} else {
			sc_fail(sc, kpos, "expected a key (a \"quoted string\") or '}', found %s",
				describe(sc, d));
		}
		if (sc->failed)
			return;
		skip_ws(sc);
		if (sc->failed)
			return;
		if (peek(sc) != ':') {
			sc_fail(sc, sc->pos, "expected ':' after the key \"%.64s\", found %s", key,
				describe(sc, d));
			return;
		}
		adv(sc);
		skip_ws(sc);
		if (sc->failed)
			return;
		old = path_push_key(sc, key);
		scan_value(sc, depth + 1, old, &kpos);
		k = next_item(sc, old, '}', &comma, &c);
		if (k > 0)
			continue;
		if (k == 0 || sc->failed || sc->r)
			return;
		sc_fail(sc, sc->pos, "expected ',' or '}' after the value of \"%.64s\", found %s%s",
			key, describe(sc, d), c == '"' ? " (missing comma?)" : "");
		return;
	}
}

static void scan_array(struct scanner *sc, unsigned int depth)
{
	struct rdp_json_pos comma = { 0, 0 };
	size_t i = 0;
	char d[16];

	adv(sc); /* '[' */
	for (;; i++) {
		size_t old;
		int c, k;

		skip_ws(sc);
		if (sc->failed || sc->r)
			return;
		c = peek(sc);
		if (c == ']') {
			if (comma.line)
				sc_fail(sc, comma, "trailing comma before ']'");
			adv(sc);
			return;
		}
		old = path_push_index(sc, i);
		scan_value(sc, depth + 1, old, NULL);
		k = next_item(sc, old, ']', &comma, &c);
		if (k > 0)
			continue;
		if (k == 0 || sc->failed || sc->r)
			return;
		sc_fail(sc, sc->pos, "expected ',' or ']' in a list, found %s%s", describe(sc, d),
			c == '"' ? " (missing comma?)" : "");
		return;
	}
}

static void scan_value(struct scanner *sc, unsigned int depth, size_t parent_len,
		       const struct rdp_json_pos *key)
{
	struct rdp_json_pos at = sc->pos;
	const char *w;
	char d[16];
	size_t n;
	int c;

	if (depth > RDP_JSON_MAX_DEPTH) {
		sc_fail(sc, at, "nested too deeply (more than %d levels)", RDP_JSON_MAX_DEPTH);
		return;
	}
	if (record(sc, parent_len, key ? *key : at, at) < 0)
		return;
	c = peek(sc);
	switch (c) {
	case '{':
		scan_object(sc, depth);
		return;
	case '[':
		scan_array(sc, depth);
		return;
	case '"':
		scan_string(sc, NULL, 0);
		return;
	case '\'':
		sc_fail(sc, at, "strings must use double quotes, not single quotes");
		return;
	case -1:
		sc_fail(sc, at, "unexpected end of file: expected a value");
		return;
	default:
		break;
	}
	if (!is_word_char(c, false, peek_at(sc, 1))) {
		sc_fail(sc, at, "expected a value, found %s", describe(sc, d));
		return;
	}
	n = read_word(sc, false, &w);
	if ((n == 4 && memcmp(w, "true", 4) == 0) || (n == 5 && memcmp(w, "false", 5) == 0) ||
	    (n == 4 && memcmp(w, "null", 4) == 0) || is_json_number(w, n))
		return;
	if ((n == 4 && strncasecmp(w, "true", 4) == 0) ||
	    (n == 5 && strncasecmp(w, "false", 5) == 0) ||
	    (n == 4 && strncasecmp(w, "null", 4) == 0)) {
		char lower[8];
		size_t k;

		for (k = 0; k < n && k < sizeof(lower) - 1; k++)
			lower[k] = (char)(w[k] | 0x20);
		lower[k] = '\0';
		sc_fail(sc, at, "JSON literals are lower-case: write %s, not %.*s", lower, (int)n, w);
		return;
	}
	sc->err->n_unquoted++;
	sc_error(sc, at, "strings must be quoted: \"%.*s\"", (int)(n > 64 ? 64 : n), w);
}

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int r = strcmp(x->path, y->path);

	if (r)
		return r;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* After sorting: the duplicate key that comes first in the document, if any. */
static void find_duplicate(struct scanner *sc)
{
	const struct entry *dup = NULL, *first = NULL;
	const struct entry *group = NULL;

	for (size_t i = 0; i < sc->n; i++) {
		const struct entry *e = &sc->v[i];

		if (!group || strcmp(group->path, e->path) != 0) {
			group = e;
			continue;
		}
		if (!dup || e->order < dup->order) {
			dup = e;
			first = group;
		}
	}
	if (dup) {
		const char *comp = dup->path + dup->parent_len;
		size_t clen;

		if (*comp == '.')
			comp++;
		clen = strlen(comp);
		if (*comp == '[') {
			comp++;
			clen = clen >= 2 ? clen - 2 : 0;
		}
		sc_fail(sc, dup->key, "%.*s%sduplicate key %s%.*s%s", (int)dup->parent_len,
			dup->path, dup->parent_len ? ": " : "", *comp == '"' ? "" : "\"", (int)clen,
			comp, *comp == '"' ? "" : "\"");
		sc->err->first = first->key;
	}
}

static void entries_free(struct entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rdp_free(v[i].path);
	rdp_free(v);
}

int rdp_json_index_build(const char *text, size_t len, struct rdp_json_index **ret,
			 struct rdp_json_syntax *err)
{
	struct rdp_json_syntax local;
	struct rdp_json_index *idx;
	struct scanner sc = {
		.s = text,
		.len = len,
		.pos = { 1, 1 },
		.err = err ? err : &local,
	};

	memset(sc.err, 0, sizeof(*sc.err));
	/* A UTF-8 byte order mark is not JSON, but editors write one; it takes no column. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		sc.i = 3;
	skip_ws(&sc);
	if (!sc.failed && peek(&sc) < 0)
		sc_fail(&sc, sc.pos, "the file is empty: expected a JSON object");
	if (!sc.failed)
		scan_value(&sc, 0, 0, NULL);
	if (!sc.failed && !sc.r) {
		skip_ws(&sc);
		if (!sc.failed && peek(&sc) >= 0) {
			char d[16];

			sc_fail(&sc, sc.pos, "unexpected %s after the end of the JSON document",
				describe(&sc, d));
		}
	}
	if (sc.r) {
		entries_free(sc.v, sc.n);
		return sc.r;
	}
	if (!sc.has_error) {
		qsort(sc.v, sc.n, sizeof(*sc.v), entry_cmp);
		find_duplicate(&sc);
	}
	if (sc.has_error) {
		entries_free(sc.v, sc.n);
		return -EINVAL;
	}
	idx = rdp_calloc(1, sizeof(*idx));
	if (!idx) {
		entries_free(sc.v, sc.n);
		return -ENOMEM;
	}
	idx->v = sc.v;
	idx->n = sc.n;
	*ret = idx;
	return 0;
}

bool rdp_json_index_find(const struct rdp_json_index *idx, const char *path,
			 struct rdp_json_pos *ret_key, struct rdp_json_pos *ret_value)
{
	size_t lo = 0, hi;

	if (!idx)
		return false;
	hi = idx->n;
	/* Lower bound: the first entry whose path is >= path. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(idx->v[mid].path, path) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= idx->n || strcmp(idx->v[lo].path, path) != 0)
		return false;
	if (ret_key)
		*ret_key = idx->v[lo].key;
	if (ret_value)
		*ret_value = idx->v[lo].value;
	return true;
}

struct rdp_json_index *rdp_json_index_free(struct rdp_json_index *idx)
{
	if (!idx)
		return NULL;
	entries_free(idx->v, idx->n);
	rdp_free(idx);
	return NULL;
}
